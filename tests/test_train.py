"""The training loop: any (logits, loss) model, schedule, decay, exact resume, NaN stop, DDP."""

import json
import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from mini_llm.checkpoint import CheckpointError, load_checkpoint
from mini_llm.data import RandomBatches
from mini_llm.gpt import GPT, GPTConfig
from mini_llm.train import (
    TrainConfig,
    TrainingDivergedError,
    learning_rate_at,
    make_optimizer,
    train,
)

TOKENS = np.array([i % 7 for i in range(3000)], dtype=np.uint16)  # a very learnable sequence


def tiny_gpt(dropout=0.1, seed=0) -> GPT:
    torch.manual_seed(seed)
    return GPT(GPTConfig(vocab_size=7, block_size=8, n_layer=1, n_head=2, n_embd=16,
                         dropout=dropout))


def batches(seed=0):
    return RandomBatches(TOKENS, block_size=8, batch_size=4, seed=seed)


def quiet(**settings) -> TrainConfig:
    defaults = {"device": "cpu", "progress": False, "warmup_iters": 2, "eval_interval": 4,
                "eval_iters": 2, "log_interval": 2, "learning_rate": 3e-3, "min_lr": 3e-4}
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
    result = train(BengioMLP(), get_batch, quiet(max_iters=60, eval_interval=20),
                   val_batches=get_batch)
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
    assert names == {"blocks.0.attn.qkv.weight", "blocks.0.attn.proj.weight",
                     "blocks.0.mlp.fc.weight", "blocks.0.mlp.proj.weight"}
    assert len(decay["params"]) + len(no_decay["params"]) == len(list(model.parameters()))


def test_resume_continues_exactly_like_the_uninterrupted_run(tmp_path):
    # dropout > 0 and random batches: equal losses need every generator restored.
    full = train(tiny_gpt(), batches(), quiet(max_iters=12, out_dir=str(tmp_path / "full")),
                 val_batches=batches(1))
    cut = str(tmp_path / "cut")
    first = train(tiny_gpt(), batches(), quiet(max_iters=6, lr_decay_iters=12, out_dir=cut),
                  val_batches=batches(1))
    assert load_checkpoint(tmp_path / "cut" / "ckpt.pt")["step"] == 6
    # Other weights and another batch seed: all of that must come back from the checkpoint.
    fresh_model, fresh_batches = tiny_gpt(seed=5), batches(seed=99)
    resumed = train(fresh_model, fresh_batches,
                    quiet(max_iters=12, lr_decay_iters=12, resume=True, out_dir=cut),
                    val_batches=batches(1))
    assert first.train_losses == full.train_losses[:6]
    assert resumed.train_losses == full.train_losses  # history carried over, then equal after 6
    assert resumed.train_losses[6:] == full.train_losses[6:] and len(resumed.train_losses) == 12
    metrics_file = tmp_path / "full" / "metrics.jsonl"
    metrics = [json.loads(line) for line in metrics_file.read_text().splitlines()]
    assert {"step", "train_loss", "lr", "tokens_per_s"} <= set(metrics[1])
    assert (tmp_path / "full" / "loss.png").read_bytes()[:4] == b"\x89PNG"


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
        train(BreaksAtStep5(), get_batch, quiet(max_iters=20, log_interval=1, checkpoint_interval=2,
                                                 out_dir=str(tmp_path)))
    assert load_checkpoint(tmp_path / "ckpt.pt")["step"] == 4
    assert not (tmp_path / "ckpt.pt.tmp").exists()


def test_missing_and_truncated_checkpoints_are_clear_errors(tmp_path):
    with pytest.raises(CheckpointError, match="no checkpoint at"):
        train(tiny_gpt(), batches(), quiet(max_iters=2, resume=True, out_dir=str(tmp_path)))
    train(tiny_gpt(), batches(), quiet(max_iters=2, out_dir=str(tmp_path)))
    path = tmp_path / "ckpt.pt"
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    with pytest.raises(CheckpointError, match="damaged or truncated"):
        train(tiny_gpt(), batches(), quiet(max_iters=4, resume=True, out_dir=str(tmp_path)))


def test_gradient_accumulation_of_two_half_batches_equals_one_full_batch():
    full_batch = batches()()
    halves = [(full_batch[0][:2], full_batch[1][:2]), (full_batch[0][2:], full_batch[1][2:])]
    one = tiny_gpt(dropout=0.0)
    train(one, lambda: full_batch, quiet(max_iters=1, grad_clip=0))
    two = tiny_gpt(dropout=0.0)
    iterator = iter(halves)
    train(two, lambda: next(iterator), quiet(max_iters=1, grad_clip=0, grad_accum_steps=2))
    for a, b in zip(one.parameters(), two.parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


DDP_SCRIPT = textwrap.dedent("""
    import os, sys, torch, numpy as np
    import torch.distributed as dist
    from mini_llm.data import RandomBatches
    from mini_llm.gpt import GPT, GPTConfig
    from mini_llm.train import TrainConfig, train

    rank = int(os.environ["RANK"])
    out = os.path.join(sys.argv[1], f"rank{rank}")  # a rank that writes would create its folder
    tokens = np.array([i % 7 for i in range(3000)], dtype=np.uint16)
    torch.manual_seed(rank)  # different initial weights: DDP must broadcast rank 0's
    model = GPT(GPTConfig(vocab_size=7, block_size=8, n_layer=1, n_head=2, n_embd=16))
    result = train(model, RandomBatches(tokens, 8, 4, seed=rank), TrainConfig(
        max_iters=6, eval_interval=3, eval_iters=2, warmup_iters=1, progress=False,
        device="cpu", out_dir=out), val_batches=RandomBatches(tokens, 8, 4, seed=10 + rank))
    flat = torch.cat([p.detach().flatten() for p in model.parameters()])
    gathered = [torch.zeros_like(flat) for _ in range(2)]
    dist.all_gather(gathered, flat)
    assert torch.equal(gathered[0], gathered[1]), "ranks ended with different weights"
    print(f"rank {rank} backend {dist.get_backend()} world {dist.get_world_size()} "
          f"val {result.val_losses[-1][1]:.4f}")
    dist.destroy_process_group()
""")


def test_two_process_torchrun_trains_and_only_rank_0_writes(tmp_path):
    script = tmp_path / "ddp_train.py"
    script.write_text(DDP_SCRIPT)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port",
         "29517", str(script), str(tmp_path)], capture_output=True, text=True, timeout=180, env=env,
        check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    for rank in (0, 1):
        assert f"rank {rank} backend gloo world 2" in done.stdout
    vals = {line.split()[-1] for line in done.stdout.splitlines() if line.startswith("rank")}
    assert len(vals) == 1  # validation loss is averaged over ranks: both report the same
    assert (tmp_path / "rank0" / "ckpt.pt").exists()
    assert not (tmp_path / "rank1").exists()
    assert len(load_checkpoint(tmp_path / "rank0" / "ckpt.pt")["ranks"]) == 2
    assert math.isfinite(float(vals.pop()))
    assert Path(tmp_path / "rank0" / "metrics.jsonl").read_text().count('"step": 6') == 2


def test_compiled_training_matches_eager_and_saves_plain_weights(tmp_path):
    settings = {"max_iters": 3, "eval_interval": 0, "grad_clip": 0, "out_dir": str(tmp_path)}
    eager = train(tiny_gpt(dropout=0.0), batches(), quiet(**settings), val_batches=batches(1))
    counters = torch._dynamo.utils.counters
    counters.clear()
    compiled = train(tiny_gpt(dropout=0.0), batches(), quiet(**settings, compile=True),
                     val_batches=batches(1))
    assert counters["stats"]["unique_graphs"] >= 1  # the model really went through the compiler
    for (_, a), (_, b) in zip(eager.train_losses, compiled.train_losses, strict=True):
        assert a == pytest.approx(b, abs=1e-4)
    saved = load_checkpoint(tmp_path / "ckpt.pt")["model"]
    assert set(saved) == set(tiny_gpt().state_dict())  # no "_orig_mod." prefixes
