"""Looking inside a GPT: head entropy, attention distance, head ablation, influence by distance."""

import math

import pytest
import torch

from mini_llm.gpt import GPT, GPTConfig
from mini_llm.inspect_model import (
    ablate_heads,
    head_entropy,
    influence_by_distance,
    mean_attention_distance,
)


def tiny() -> GPT:
    torch.manual_seed(0)
    return GPT(GPTConfig(vocab_size=13, block_size=8, n_layer=2, n_head=2, n_embd=16)).eval()


def test_entropy_and_distance_of_known_maps():
    T = 4
    on_self = torch.eye(T).expand(1, 1, T, T)
    on_first = torch.zeros(1, 1, T, T)
    on_first[..., 0] = 1
    even = torch.tril(torch.ones(T, T)) / torch.arange(1, T + 1)[:, None]
    maps = torch.cat([on_self, on_first, even.expand(1, 1, T, T)], dim=1)
    entropy = head_entropy(maps)
    torch.testing.assert_close(
        entropy, torch.tensor([0.0, 0.0, sum(math.log(t) for t in range(1, T + 1)) / T])
    )
    # distances: 0 (itself); i back for query i (first token); i/2 for the even spread
    torch.testing.assert_close(
        mean_attention_distance(maps), torch.tensor([0.0, 1.5, sum(i / 2 for i in range(T)) / T])
    )
    with pytest.raises(ValueError, match="B, H, T, T"):
        head_entropy(torch.ones(2, 3, 4))


def test_ablating_a_head_zeroes_its_share_of_the_projection_input():
    model = tiny()
    idx = torch.randint(13, (2, 8))
    before = model(idx)[0]
    with ablate_heads(model, [(1, 0)]):
        silenced = model(idx)[0]
        # by hand: block 1's output projection sees zeros in head 0's slice
        seen = []
        handle = model.blocks[1].attn.proj.register_forward_hook(
            lambda _m, inputs, _out: seen.append(inputs[0])
        )
        model(idx)
        handle.remove()
    assert torch.all(seen[0][..., :8] == 0) and seen[0][..., 8:].abs().sum() > 0
    assert (silenced - before).abs().max() > 1e-4
    torch.testing.assert_close(model(idx)[0], before)  # hooks removed on exit
    with pytest.raises(ValueError, match="no head"), ablate_heads(model, [(2, 0)]):
        pass


def test_influence_is_zero_beyond_the_context_and_positive_within():
    model = tiny()
    windows = torch.randint(13, (5, 12))
    changes = influence_by_distance(model, windows, range(1, 13))
    assert all(c > 0 for c in changes[:8])  # within the 8-token context
    assert changes[8:] == [0.0] * 4  # beyond it: the model never sees those tokens
    with pytest.raises(ValueError, match="outside"):
        influence_by_distance(model, windows, [13])
