"""Splitting a batch's rows across CPU cores: the same gradient, the same run, errors passed on."""

import threading
from dataclasses import replace

import pytest
import torch
from torch import nn

from mini_llm.engine.cpu_parallel import CoreWorkers, decide
from mini_llm.engine.train import TrainConfig, train
from mini_llm.gpt import GPT, GPTConfig

CONFIG = GPTConfig(vocab_size=23, block_size=8, n_layer=2, n_head=2, n_embd=16)
CPU = torch.device("cpu")


@pytest.fixture
def two_threads():
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(before)


def gpt(seed=0, **changes) -> GPT:
    torch.manual_seed(seed)
    return GPT(replace(CONFIG, **changes))


def batch(rows=5, seed=1):
    generator = torch.Generator().manual_seed(seed)
    x = torch.randint(CONFIG.vocab_size, (rows, CONFIG.block_size), generator=generator)
    y = torch.randint(CONFIG.vocab_size, (rows, CONFIG.block_size), generator=generator)
    y[0, :6] = -1  # ignored targets, all in the first share: shares count unequal targets
    return x, y


def gradients(model):
    return [p.grad.clone() for p in model.parameters()]


def test_shares_give_the_whole_batchs_loss_and_gradient(two_threads):
    """Weighted by counted targets, not by rows: the first share has six targets fewer."""
    model = gpt()
    x, y = batch(rows=5)  # 5 rows into 2 shares: 3 and 2
    _, loss = model(x, y)
    loss.backward()
    whole = gradients(model)
    model.zero_grad(set_to_none=True)
    with CoreWorkers(2) as cores:
        shared_loss = cores.forward_backward(model, x, y)
    assert torch.allclose(shared_loss, loss.detach(), atol=1e-6)
    for expected, got in zip(whole, gradients(model), strict=True):
        torch.testing.assert_close(got, expected, atol=1e-6, rtol=1e-5)


def test_scaled_shares_add_to_gradients_already_there(two_threads):
    """Gradient accumulation: two half-weighted batches on top of each other."""
    model = gpt()
    batches = [batch(rows=4, seed=s) for s in (1, 2)]
    for x, y in batches:
        (model(x, y)[1] / 2).backward()
    whole = gradients(model)
    model.zero_grad(set_to_none=True)
    with CoreWorkers(2) as cores:
        for x, y in batches:
            cores.forward_backward(model, x, y, scale=0.5)
    for expected, got in zip(whole, gradients(model), strict=True):
        torch.testing.assert_close(got, expected, atol=1e-6, rtol=1e-5)


def test_a_batch_of_one_row_runs_on_this_thread(two_threads):
    model = gpt()
    x, y = batch(rows=1)
    _, loss = model(x, y)
    loss.backward()
    whole = gradients(model)
    model.zero_grad(set_to_none=True)
    with CoreWorkers(2) as cores:
        cores.forward_backward(model, x, y)
    for expected, got in zip(whole, gradients(model), strict=True):
        torch.testing.assert_close(got, expected)


def test_gradients_keep_the_parameters_layout(two_threads):
    """autograd.grad hands some weight gradients back transposed; fused AdamW reads a gradient
    as laid out like its parameter, so a transposed one would scramble the step."""
    model = gpt(n_embd=32, block_size=32)
    x = torch.randint(CONFIG.vocab_size, (32, 32), generator=torch.Generator().manual_seed(0))
    with CoreWorkers(2) as cores:
        cores.forward_backward(model, x, x.roll(-1, dims=1))
    for name, parameter in model.named_parameters():
        assert parameter.grad.stride() == parameter.stride(), name


def test_one_optimizer_step_matches_the_whole_batchs():
    """Adam's first step moves every weight by about the learning rate, whatever the size of
    its gradient: a gradient read in the wrong layout shows at once."""
    shape = {"n_embd": 32, "block_size": 32}
    x = torch.randint(CONFIG.vocab_size, (32, 32), generator=torch.Generator().manual_seed(0))
    weights = {}
    for split in (True, False):
        model = gpt(**shape)
        config = TrainConfig(
            max_iters=1, eval_interval=0, threads=2, progress=False, split_across_cores=split
        )
        train(model, lambda: (x, x.roll(-1, dims=1)), config)
        weights[split] = list(model.parameters())
    for a, b in zip(weights[True], weights[False], strict=True):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=0)


def test_the_callers_thread_count_is_one_inside_and_restored_after(two_threads):
    with CoreWorkers(2) as cores:
        assert torch.get_num_threads() == 1  # its idle threads would spin on the helpers' cores
        with cores.all_threads():
            assert torch.get_num_threads() == 2
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == 2
    assert not [t for t in threading.enumerate() if t.name == "mini_llm-core"]


class FailsOnSecondShare(nn.Module):
    """Raises in whichever thread gets the rows that start with token 7."""

    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(()))

    def forward(self, x, y):
        if x[0, 0] == 7:
            raise ValueError("bad share")
        return None, (self.weight * x.float()).mean()


def test_an_error_in_a_helper_reaches_the_caller_and_no_thread_is_left(two_threads):
    x = torch.tensor([[1], [7]])
    with CoreWorkers(2) as cores, pytest.raises(ValueError, match="bad share"):
        cores.forward_backward(FailsOnSecondShare(), x, x)
    assert not [t for t in threading.enumerate() if t.name == "mini_llm-core"]


def test_decide_splits_a_gpt_on_a_cpu_with_threads_and_says_why_not_elsewhere(two_threads):
    model = gpt()
    assert decide(model, CPU).workers == 2
    reasons = {
        "split_across_cores=False": decide(model, CPU, enabled=False),
        "not on the CPU": decide(model, torch.device("cuda")),
        "already one worker": decide(model, CPU, distributed=True),
        "torch.compile": decide(model, CPU, compiled=True),
        "autocast": decide(model, CPU, low_precision=torch.bfloat16),
        "not known to be a mean over counted targets": decide(nn.Linear(2, 2), CPU),
        "dropout": decide(gpt(dropout=0.1), CPU),
    }
    for reason, decision in reasons.items():
        assert decision.workers == 0 and reason in str(decision), reason
    torch.set_num_threads(1)
    assert "one thread" in str(decide(model, CPU)) and not decide(model, CPU).workers


def random_batches(seed=3):
    generator = torch.Generator().manual_seed(seed)

    def draw():
        x = torch.randint(CONFIG.vocab_size, (6, CONFIG.block_size), generator=generator)
        return x, torch.roll(x, -1, dims=1)

    return draw


def trained(split: bool, **settings):
    model = gpt()
    config = TrainConfig(
        max_iters=12,
        warmup_iters=2,
        eval_interval=6,
        eval_iters=2,
        log_interval=4,
        threads=2,
        progress=False,
        split_across_cores=split,
        **settings,
    )
    result = train(model, random_batches(), config, val_batches=random_batches(4))
    return model, result


def test_train_splits_reproducibly_and_follows_the_whole_batch_run():
    model, result = trained(split=True)
    again, repeated = trained(split=True)
    assert "split across 2 cores" in result.core_split
    assert result.train_losses == repeated.train_losses  # the same run, bit for bit
    for a, b in zip(model.parameters(), again.parameters(), strict=True):
        assert torch.equal(a, b)
    whole_model, whole = trained(split=False)
    assert "split_across_cores=False" in whole.core_split
    for (_, split_loss), (_, whole_loss) in zip(result.train_losses, whole.train_losses):
        assert split_loss == pytest.approx(whole_loss, rel=1e-4)  # the same gradients, to rounding
    for a, b in zip(model.parameters(), whole_model.parameters(), strict=True):
        torch.testing.assert_close(a, b, atol=1e-4, rtol=1e-3)


def test_train_with_accumulation_splits_each_micro_batch():
    model, result = trained(split=True, grad_accum_steps=2)
    whole_model, whole = trained(split=False, grad_accum_steps=2)
    for (_, split_loss), (_, whole_loss) in zip(result.train_losses, whole.train_losses):
        assert split_loss == pytest.approx(whole_loss, rel=1e-4)
    for a, b in zip(model.parameters(), whole_model.parameters(), strict=True):
        torch.testing.assert_close(a, b, atol=1e-4, rtol=1e-3)
