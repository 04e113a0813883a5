"""FLOPs per token and MFU: the counts chapter 12 derives, checked against a measured model."""

import pytest
import torch

from mini_llm.engine import cpu_linear
from mini_llm.engine.bench import train_step_times
from mini_llm.flops import flops_per_token, gpt_flops_per_token, mfu
from mini_llm.gpt import GPT, GPTConfig


def test_flops_per_token_is_six_n_plus_attention():
    assert flops_per_token(1_000_000, 2, 128, 64) == 6_000_000 + 12 * 2 * 128 * 64
    assert flops_per_token(0, 0, 0, 0) == 0
    with pytest.raises(ValueError, match="n_layer"):
        flops_per_token(10, -1, 8, 8)


def test_gpt_flops_count_every_weight_of_the_model_but_the_positions():
    config = GPTConfig(vocab_size=65, block_size=32, n_layer=2, n_head=2, n_embd=32)
    model = GPT(config)
    matmul = model.num_parameters() - model.position_embedding.weight.numel()
    assert gpt_flops_per_token(config) == 6 * matmul + 12 * 2 * 32 * 32


def test_forward_flops_agree_with_pytorchs_counter():
    """A third of the count (the forward pass) is what torch's FLOP counter sees, give or take
    the LayerNorm gains, which it does not count (attention written out, so that its products
    are matrix multiplies the counter sees)."""
    from torch.utils.flop_counter import FlopCounterMode

    config = GPTConfig(
        vocab_size=65,
        block_size=64,
        n_layer=2,
        n_head=2,
        n_embd=64,
        bias=False,
        attention="explicit",
    )
    model = GPT(config)
    idx = torch.randint(65, (2, 64))
    # plain products: the counter does not see cpu_linear's oneDNN calls
    with cpu_linear.forced(False), FlopCounterMode(display=False) as counter:
        model(idx)
    per_token = counter.get_total_flops() / idx.numel()
    # causal attention is counted in full (T x T) by the counter, as in 12·L·T·d
    assert per_token == pytest.approx(gpt_flops_per_token(config) / 3, rel=0.02)


def test_mfu_is_a_fraction_of_the_peak():
    assert mfu(1000.0, 1e9, 1e13) == pytest.approx(0.1)
    with pytest.raises(ValueError, match="positive"):
        mfu(1000.0, 1e9, 0)
    with pytest.raises(ValueError, match="negative"):
        mfu(-1.0, 1e9, 1e12)


class DtypeProbe(torch.nn.Module):
    """forward(x, y) that records the dtype its linear layer computed in."""

    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(4, 4)
        self.seen = []

    def forward(self, x, y):
        out = self.linear(x)
        self.seen.append(out.dtype)
        return out, (out.float() - y).pow(2).mean()


@pytest.mark.parametrize(
    "autocast_to, computed_in", [(None, torch.float32), (torch.bfloat16, torch.bfloat16)]
)
def test_step_times_run_the_forward_pass_in_the_precision_asked_for(autocast_to, computed_in):
    probe = DtypeProbe()
    optimizer = torch.optim.AdamW(probe.parameters())
    batches = [(torch.randn(2, 4), torch.randn(2, 4))] * 3
    times = train_step_times(probe, batches, optimizer, warmup=1, autocast_to=autocast_to)
    assert len(times) == 2 and all(ms > 0 for ms in times)
    assert probe.seen == [computed_in] * 3
    assert probe.linear.weight.dtype == torch.float32  # autocast casts copies, not the weights
