"""The training loop: any (logits, loss) model, schedule, decay, exact resume, NaN stop, DDP."""

import json
import math
import os
import platform
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from mini_llm.engine import cpu_linear
from mini_llm.engine.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from mini_llm.engine.cpu_linear import Decision
from mini_llm.engine.data import RandomBatches
from mini_llm.engine.schedule import learning_rate_at, warmup_cosine_learning_rate
from mini_llm.engine.train import (
    TrainConfig,
    TrainingDivergedError,
    autocast_dtype,
    forget_metrics_after,
    make_optimizer,
    train,
    use_tf32_products,
)
from mini_llm.gpt import GPT, GPTConfig

TOKENS = np.array([i % 7 for i in range(3000)], dtype=np.uint16)  # a very learnable sequence
# (block_size, n_embd, batch_size): at "fast path" the q,k,v and MLP products are large enough
# for cpu_linear's oneDNN path, even for half a batch (8·32 rows of 64 into 192 > 2²¹).
SIZES = {"tiny": (8, 16, 4), "fast path": (32, 64, 16)}
X86 = platform.machine().lower() in ("x86_64", "amd64")


def tiny_gpt(dropout=0.1, seed=0, size="tiny") -> GPT:
    block_size, n_embd, _ = SIZES[size]
    torch.manual_seed(seed)
    return GPT(
        GPTConfig(
            vocab_size=7, block_size=block_size, n_layer=1, n_head=2, n_embd=n_embd, dropout=dropout
        )
    )


def batches(seed=0, size="tiny"):
    block_size, _, batch_size = SIZES[size]
    return RandomBatches(TOKENS, block_size=block_size, batch_size=batch_size, seed=seed)


@pytest.fixture(params=list(SIZES))
def size(request, monkeypatch):
    """Runs an engine test twice: tiny, and at a size that takes cpu_linear's oneDNN path.

    The fast path is forced on, so the test means the same on any x86 CPU, and the test fails
    if no product went through it.
    """
    if request.param == "tiny":
        yield request.param
        return
    if not X86:
        pytest.skip(f"cpu_linear's oneDNN path is x86-64 only; this is {platform.machine()}")
    monkeypatch.setattr(cpu_linear, "_decision", Decision(True, "forced by the test"))
    calls = []
    real = cpu_linear.onednn_matmul
    monkeypatch.setattr(cpu_linear, "onednn_matmul", lambda *args: calls.append(1) or real(*args))
    yield request.param
    assert calls, "no product took the oneDNN path"


def quiet(**settings) -> TrainConfig:
    defaults = {
        "device": "cpu",
        "progress": False,
        "warmup_iters": 2,
        "eval_interval": 4,
        "eval_iters": 2,
        "log_interval": 2,
        "learning_rate": 3e-3,
        "min_lr": 3e-4,
    }
    return TrainConfig(**{**defaults, **settings})


class BengioMLP(nn.Module):
    """A chapter-3-style model: embed the previous 3 characters, one hidden layer, logits."""

    def __init__(self, vocab=7, context=3, width=32):
        super().__init__()
        self.embedding = nn.Embedding(vocab, 8)
        self.hidden = nn.Linear(context * 8, width)
        self.out = nn.Linear(width, vocab)

    def forward(self, x, y=None):
        logits = self.out(torch.tanh(self.hidden(self.embedding(x).flatten(1))))
        loss = None if y is None else nn.functional.cross_entropy(logits, y)
        return logits, loss


def test_any_logits_loss_model_trains_in_process_without_files(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    data = torch.tensor(TOKENS.astype(np.int64))
    windows = data.unfold(0, 4, 1)

    def get_batch():
        rows = windows[torch.randint(len(windows), (32,))]
        return rows[:, :3], rows[:, 3]

    torch.manual_seed(0)
    result = train(
        BengioMLP(), get_batch, quiet(max_iters=60, eval_interval=20), val_batches=get_batch
    )
    assert [step for step, _ in result.train_losses] == list(range(1, 61))
    assert [step for step, _ in result.val_losses] == [0, 20, 40, 60]
    assert result.val_losses[-1][1] < 0.5 * result.val_losses[0][1]  # it learned
    assert list(tmp_path.iterdir()) == []  # no out_dir: nothing written


def test_learning_rate_warms_up_then_follows_a_cosine_to_min_lr():
    config = TrainConfig(learning_rate=1.0, min_lr=0.1, warmup_iters=10, max_iters=110)
    assert learning_rate_at(0, config) == pytest.approx(0.1)
    assert learning_rate_at(9, config) == pytest.approx(1.0)
    assert learning_rate_at(60, config) == pytest.approx(0.55)  # half way down the cosine
    assert learning_rate_at(110, config) == pytest.approx(0.1)
    assert learning_rate_at(500, config) == pytest.approx(0.1)


def test_the_schedule_from_plain_numbers_is_the_configs_and_refuses_a_negative_step():
    config = TrainConfig(learning_rate=1.0, min_lr=0.1, warmup_iters=10, max_iters=110)
    for step in (0, 9, 10, 37, 109, 110, 400):
        assert warmup_cosine_learning_rate(step, 1.0, 0.1, 10, 110) == learning_rate_at(
            step, config
        )
    assert warmup_cosine_learning_rate(0, 1.0, 0.1, 0, 100) == 1.0  # no warm-up: the peak at once
    with pytest.raises(ValueError, match="negative"):
        warmup_cosine_learning_rate(-1, 1.0, 0.1, 10, 110)


def test_noam_schedule_is_the_papers_peaking_at_learning_rate():
    from mini_llm.transformer import noam_learning_rate  # chapter 9's

    config = TrainConfig(learning_rate=2.0, warmup_iters=16, max_iters=100, schedule="noam")
    rates = [learning_rate_at(step, config) for step in range(100)]
    assert int(np.argmax(rates)) == 15 and rates[15] == pytest.approx(2.0)  # step 16 of 1..100
    # the paper's shape, rescaled: lr(step) / noam(step + 1) is the same at every step
    ratios = [rate / noam_learning_rate(step + 1, 512, 16) for step, rate in enumerate(rates)]
    assert max(ratios) == pytest.approx(min(ratios))
    assert rates[63] == pytest.approx(1.0)  # step 64 = 4 x warm-up: half the peak
    with pytest.raises(ValueError, match="schedule must be"):
        TrainConfig(schedule="linear")
    with pytest.raises(ValueError, match="warmup_iters >= 1"):
        TrainConfig(schedule="noam", warmup_iters=0)
    result = train(
        BengioMLP(),
        lambda: (torch.randint(7, (8, 3)), torch.randint(7, (8,))),
        quiet(max_iters=3, schedule="noam", warmup_iters=2),
    )
    assert result.step == 3


def test_noam_schedule_is_looked_up_when_called(monkeypatch):
    """``mini-llm train --learner`` swaps ``transformer.noam_learning_rate`` for the learner's
    (mini_llm/learner/registry.py); the loop must call whatever is there then."""
    from mini_llm import transformer

    config = TrainConfig(learning_rate=2.0, warmup_iters=4, schedule="noam")
    monkeypatch.setattr(transformer, "noam_learning_rate", lambda step, d_model, warmup: 0.25)
    assert learning_rate_at(7, config) == pytest.approx(2.0 * 0.25 * 4**0.5)


def test_the_loop_looks_up_the_schedule_when_called(monkeypatch):
    """``mini-llm train --learner`` swaps ``schedule.learning_rate_at`` too: at a rate of 0 the
    learner's schedule leaves every weight where it was."""
    from mini_llm.engine import schedule

    monkeypatch.setattr(schedule, "learning_rate_at", lambda step, config: 0.0)
    model = BengioMLP()
    before = [p.detach().clone() for p in model.parameters()]
    train(model, lambda: (torch.randint(7, (8, 3)), torch.randint(7, (8,))), quiet(max_iters=3))
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))


def test_threads_apply_during_training_only():
    seen = []

    def get_batch():
        seen.append(torch.get_num_threads())
        return torch.randint(7, (8, 3)), torch.randint(7, (8,))

    before = torch.get_num_threads()
    train(BengioMLP(), get_batch, quiet(max_iters=2, threads=before + 1))
    assert seen == [before + 1] * 2 and torch.get_num_threads() == before


def test_bad_settings_are_clear_errors():
    with pytest.raises(ValueError, match="log_interval must be at least 1"):
        TrainConfig(log_interval=0)
    with pytest.raises(ValueError, match="dtype must be"):
        TrainConfig(dtype="fp16")


def test_eval_interval_zero_evaluates_and_saves_at_the_end_only(tmp_path):
    config = quiet(max_iters=5, eval_interval=0, out_dir=str(tmp_path))
    result = train(tiny_gpt(), batches(), config, val_batches=batches(1))
    assert [step for step, _ in result.val_losses] == [0, 5]
    assert load_checkpoint(tmp_path / "ckpt.pt")["step"] == 5


def test_no_weight_decay_on_biases_norms_and_embeddings():
    model = tiny_gpt()
    optimizer = make_optimizer(model, TrainConfig(weight_decay=0.1), torch.device("cpu"))
    decay, no_decay = optimizer.param_groups
    assert decay["weight_decay"] == 0.1 and no_decay["weight_decay"] == 0.0
    decayed = {id(p) for p in decay["params"]}
    names = {name for name, p in model.named_parameters() if id(p) in decayed}
    assert names == {
        "blocks.0.attn.qkv.weight",
        "blocks.0.attn.proj.weight",
        "blocks.0.mlp.fc.weight",
        "blocks.0.mlp.proj.weight",
    }
    assert len(decay["params"]) + len(no_decay["params"]) == len(list(model.parameters()))


def test_resume_continues_exactly_like_the_uninterrupted_run(tmp_path, size):
    # dropout > 0 and random batches: equal losses need every generator restored.
    full = train(
        tiny_gpt(size=size),
        batches(size=size),
        quiet(max_iters=12, out_dir=str(tmp_path / "full")),
        val_batches=batches(1, size),
    )
    cut = str(tmp_path / "cut")
    first = train(
        tiny_gpt(size=size),
        batches(size=size),
        quiet(max_iters=6, lr_decay_iters=12, out_dir=cut),
        val_batches=batches(1, size),
    )
    assert load_checkpoint(tmp_path / "cut" / "ckpt.pt")["step"] == 6
    # Other weights and another batch seed: all of that must come back from the checkpoint.
    fresh_model, fresh_batches = tiny_gpt(seed=5, size=size), batches(seed=99, size=size)
    resumed = train(
        fresh_model,
        fresh_batches,
        quiet(max_iters=12, lr_decay_iters=12, resume=True, out_dir=cut),
        val_batches=batches(1, size),
    )
    assert first.train_losses == full.train_losses[:6]
    assert resumed.train_losses == full.train_losses  # history carried over, then equal after 6
    assert resumed.train_losses[6:] == full.train_losses[6:] and len(resumed.train_losses) == 12
    metrics_file = tmp_path / "full" / "metrics.jsonl"
    metrics = [json.loads(line) for line in metrics_file.read_text().splitlines()]
    assert {"step", "train_loss", "lr", "tokens_per_s"} <= set(metrics[1])
    assert (tmp_path / "full" / "loss.png").read_bytes()[:4] == b"\x89PNG"


def test_resume_with_another_schedule_is_refused_naming_what_changed(tmp_path):
    out = str(tmp_path)
    train(tiny_gpt(), batches(), quiet(max_iters=6, out_dir=out))  # the cosine ends at step 6

    def resume(**settings):
        return train(tiny_gpt(), batches(), quiet(resume=True, out_dir=out, **settings))

    with pytest.raises(
        CheckpointError,
        match=r"resume refused.*max_iters 6 -> 12: the cosine "
        r"would end at step 12, not 6.*lr_decay_iters=6",
    ) as refused:
        resume(max_iters=12)
    rates = {s: (learning_rate_at(s, quiet(max_iters=6)), learning_rate_at(s, quiet(max_iters=12)))
             for s in range(6, 12)}  # fmt: skip
    worst = max(rates, key=lambda s: abs(rates[s][1] - rates[s][0]))
    before, after = rates[worst]
    said = f"at step {worst} the rate would be {after:.3g} instead of {before:.3g}"
    assert said in str(refused.value) and after > 5 * before
    with pytest.raises(CheckpointError, match=r"learning_rate 0.003 -> 0.001"):
        resume(max_iters=8, lr_decay_iters=6, learning_rate=1e-3)
    # The two ways on: the saved schedule (the rate stays at min_lr), or the new one, asked for.
    resume(max_iters=8, lr_decay_iters=6)
    lrs = [json.loads(line).get("lr") for line in (tmp_path / "metrics.jsonl").open()]
    assert lrs[-1] == quiet().min_lr
    assert resume(max_iters=10, new_schedule=True).step == 10


def test_resume_with_another_number_of_processes_is_an_error(tmp_path):
    train(tiny_gpt(), batches(), quiet(max_iters=2, out_dir=str(tmp_path)))
    state = load_checkpoint(tmp_path / "ckpt.pt")
    state["ranks"] = state["ranks"] * 2  # as if written by a run of two processes
    save_checkpoint(state, tmp_path / "ckpt.pt")
    with pytest.raises(CheckpointError, match=r"written by 2 process\(es\) and this run has 1"):
        train(tiny_gpt(), batches(), quiet(max_iters=4, resume=True, out_dir=str(tmp_path)))


def test_checkpoints_reach_the_disk_before_and_after_the_rename(tmp_path, monkeypatch):
    synced = []
    real_fsync = os.fsync
    monkeypatch.setattr(
        os,
        "fsync",
        lambda fd: (
            synced.append(
                (stat.S_ISDIR(os.fstat(fd).st_mode), os.path.exists(tmp_path / "ckpt.pt"))
            )
            or real_fsync(fd)
        ),
    )
    save_checkpoint({"model": {}}, tmp_path / "ckpt.pt")
    assert synced == [(False, False), (True, True)]  # the file's bytes, then the folder's entry


@pytest.mark.parametrize("bf16_gpu", [True, False])
def test_bf16_only_where_the_device_supports_it(monkeypatch, bf16_gpu):
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda including_emulation: bf16_gpu)
    cuda, cpu = torch.device("cuda"), torch.device("cpu")
    assert autocast_dtype(cuda, "auto") == (torch.bfloat16 if bf16_gpu else None)
    assert autocast_dtype(cuda, "fp32") is None and autocast_dtype(cpu, "auto") is None
    if not bf16_gpu:
        with pytest.raises(ValueError, match="bfloat16 support, not this GPU"):
            autocast_dtype(cuda, "bf16")
    with pytest.raises(ValueError, match="not device 'cpu'"):
        autocast_dtype(cpu, "bf16")


def test_nan_loss_stops_with_a_clear_error_and_keeps_the_last_good_checkpoint(tmp_path):
    class BreaksAtStep5(BengioMLP):
        calls = 0

        def forward(self, x, y=None):
            self.calls += 1
            logits, loss = super().forward(x, y)
            return logits, loss * float("nan") if self.calls >= 5 and self.training else loss

    def get_batch():
        return torch.randint(7, (8, 3)), torch.randint(7, (8,))

    message = r"loss became nan at step 5.*last good checkpoint"
    with pytest.raises(TrainingDivergedError, match=message):
        train(
            BreaksAtStep5(),
            get_batch,
            quiet(max_iters=20, log_interval=1, checkpoint_interval=2, out_dir=str(tmp_path)),
        )
    assert load_checkpoint(tmp_path / "ckpt.pt")["step"] == 4
    assert not (tmp_path / "ckpt.pt.tmp").exists()


def test_resume_into_another_model_is_one_short_line(tmp_path):
    train(tiny_gpt(), batches(), quiet(max_iters=2, out_dir=str(tmp_path)))
    wider = GPT(GPTConfig(vocab_size=7, block_size=8, n_layer=1, n_head=2, n_embd=32))
    with pytest.raises(CheckpointError) as refused:
        train(
            wider,
            batches(),
            quiet(max_iters=4, lr_decay_iters=2, resume=True, out_dir=str(tmp_path)),
        )
    message = str(refused.value)
    assert (
        "different model or optimizer (blocks.0.attn.proj.bias is [16] there, [32] here, and "
        in message
        and "--out" in message
    )
    assert len(message) < 300 and refused.value.__cause__ is None  # no list of every tensor


def test_missing_and_truncated_checkpoints_are_clear_errors(tmp_path):
    with pytest.raises(CheckpointError, match="no checkpoint at"):
        train(tiny_gpt(), batches(), quiet(max_iters=2, resume=True, out_dir=str(tmp_path)))
    train(tiny_gpt(), batches(), quiet(max_iters=2, out_dir=str(tmp_path)))
    path = tmp_path / "ckpt.pt"
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    with pytest.raises(CheckpointError, match="cannot be read: the zip archive has no end"):
        train(tiny_gpt(), batches(), quiet(max_iters=4, resume=True, out_dir=str(tmp_path)))


def test_gradient_accumulation_of_two_half_batches_equals_one_full_batch(size):
    full_batch = batches(size=size)()
    half = len(full_batch[0]) // 2
    halves = [
        (full_batch[0][:half], full_batch[1][:half]),
        (full_batch[0][half:], full_batch[1][half:]),
    ]
    one = tiny_gpt(dropout=0.0, size=size)
    train(one, lambda: full_batch, quiet(max_iters=1, grad_clip=0))
    two = tiny_gpt(dropout=0.0, size=size)
    iterator = iter(halves)
    train(two, lambda: next(iterator), quiet(max_iters=1, grad_clip=0, grad_accum_steps=2))
    for a, b in zip(one.parameters(), two.parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


DDP_SCRIPT = textwrap.dedent("""
    import os, sys, torch, numpy as np
    import torch.distributed as dist
    from mini_llm.engine import cpu_linear
    from mini_llm.engine.data import RandomBatches
    from mini_llm.gpt import GPT, GPTConfig
    from mini_llm.engine.train import TrainConfig, train

    calls = []  # products sent to oneDNN (MINI_LLM_ONEDNN=on, and big enough)
    real = cpu_linear.onednn_matmul
    cpu_linear.onednn_matmul = lambda *args: calls.append(1) or real(*args)
    rank = int(os.environ["RANK"])
    out = os.path.join(sys.argv[1], f"rank{rank}")  # a rank that writes would create its folder
    tokens = np.array([i % 7 for i in range(3000)], dtype=np.uint16)
    torch.manual_seed(rank)  # different initial weights: DDP must broadcast rank 0's
    model = GPT(GPTConfig(vocab_size=7, block_size=32, n_layer=1, n_head=2, n_embd=64))
    result = train(model, RandomBatches(tokens, 32, 16, seed=rank), TrainConfig(
        max_iters=6, eval_interval=3, eval_iters=2, warmup_iters=1, grad_accum_steps=2,
        progress=False, device="cpu", out_dir=out),
        val_batches=RandomBatches(tokens, 32, 16, seed=10 + rank))
    assert not dist.is_initialized(), "train() left its process group behind"
    torch.save(model.state_dict(), os.path.join(sys.argv[1], f"weights{rank}.pt"))
    print(f"rank {rank} val {result.val_losses[-1][1]:.4f} onednn {len(calls)}")
""")


def test_two_process_torchrun_with_accumulation_trains_alike_and_only_rank_0_writes(tmp_path):
    script = tmp_path / "ddp_train.py"
    script.write_text(DDP_SCRIPT)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MINI_LLM_ONEDNN": "on"}
    done = subprocess.run(
        # --standalone: the rendezvous takes a free port, so parallel test runs cannot collide
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc_per_node",
            "2",
            str(script),
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=180,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = sorted(line.split() for line in done.stdout.splitlines() if line.startswith("rank"))
    assert [line[1] for line in lines] == ["0", "1"]
    if X86:  # elsewhere there is no oneDNN path to take
        assert all(int(line[-1]) > 0 for line in lines), "a rank never took the oneDNN path"
    vals = {line[3] for line in lines}
    assert len(vals) == 1  # validation loss is averaged over ranks: both report the same
    assert math.isfinite(float(vals.pop()))
    weights = [torch.load(tmp_path / f"weights{rank}.pt") for rank in (0, 1)]
    for name, tensor in weights[0].items():  # rank 0's weights were broadcast, then kept alike
        assert torch.equal(tensor, weights[1][name]), name
    assert (tmp_path / "rank0" / "ckpt.pt").exists()
    assert not (tmp_path / "rank1").exists()
    assert len(load_checkpoint(tmp_path / "rank0" / "ckpt.pt")["ranks"]) == 2
    assert Path(tmp_path / "rank0" / "metrics.jsonl").read_text().count('"step": 6') == 2


@pytest.mark.slow  # torch.compile (make check leaves it out)
def test_compiled_training_matches_eager_and_saves_plain_weights(tmp_path, size):
    settings = {"max_iters": 3, "eval_interval": 0, "grad_clip": 0, "out_dir": str(tmp_path)}
    eager = train(
        tiny_gpt(dropout=0.0, size=size),
        batches(size=size),
        quiet(**settings),
        val_batches=batches(1, size),
    )
    counters = torch._dynamo.utils.counters
    counters.clear()
    compiled = train(
        tiny_gpt(dropout=0.0, size=size),
        batches(size=size),
        quiet(**settings, compile=True),
        val_batches=batches(1, size),
    )
    assert counters["stats"]["unique_graphs"] >= 1  # the model really went through the compiler
    for (_, a), (_, b) in zip(eager.train_losses, compiled.train_losses, strict=True):
        assert a == pytest.approx(b, abs=1e-4)
    saved = load_checkpoint(tmp_path / "ckpt.pt")["model"]
    assert set(saved) == set(tiny_gpt().state_dict())  # no "_orig_mod." prefixes


def test_tf32_products_are_turned_on_for_a_cuda_device_only():
    before = torch.get_float32_matmul_precision()
    try:
        torch.set_float32_matmul_precision("highest")
        use_tf32_products(torch.device("cpu"))
        assert torch.get_float32_matmul_precision() == "highest"  # a CPU's float32 stays exact
        use_tf32_products(torch.device("cuda"))  # a setting, so it needs no GPU to be made
        assert torch.get_float32_matmul_precision() == "high"
    finally:
        torch.set_float32_matmul_precision(before)


def test_a_resumed_run_forgets_the_metrics_logged_after_its_checkpoint(tmp_path):
    path = tmp_path / "metrics.jsonl"
    records = [{"step": step, "train_loss": 1.0} for step in range(0, 31, 10)]
    path.write_text("".join(json.dumps(r) + "\n" for r in records) + "not a record\n")
    forget_metrics_after(path, 20)
    assert path.read_text().splitlines() == [json.dumps(r) for r in records[:3]] + ["not a record"]
    forget_metrics_after(tmp_path / "none.jsonl", 5)  # no file: nothing to forget
    assert not (tmp_path / "none.jsonl").exists()
