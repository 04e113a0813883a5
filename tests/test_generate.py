"""Generation: the KV cache changes the speed, never the tokens; sampling filters; bad settings."""

import pytest
import torch

from mini_llm.generate import filter_logits, generate, new_caches, next_token
from mini_llm.gpt import GPT, GPTConfig


def model(attention="fused", block_size=12) -> GPT:
    torch.manual_seed(0)
    gpt = GPT(
        GPTConfig(
            vocab_size=13,
            block_size=block_size,
            n_layer=2,
            n_head=2,
            n_embd=32,
            attention=attention,
        )
    )
    with torch.no_grad():  # larger weights than the init, so sampled tokens differ a lot
        for p in gpt.parameters():
            p.mul_(8)
    return gpt.eval()


@pytest.mark.parametrize("attention", ["fused", "explicit"])
@pytest.mark.parametrize("prompt_length", [1, 5, 12, 20])  # 20 > block_size: cropped
def test_greedy_tokens_are_the_same_with_and_without_cache(attention, prompt_length):
    gpt = model(attention)
    prompt = torch.randint(13, (2, prompt_length), generator=torch.Generator().manual_seed(3))
    # 30 new tokens run well past block_size=12, so the cache has to refill its window.
    cached = generate(gpt, prompt, 30, temperature=0, use_cache=True)
    uncached = generate(gpt, prompt, 30, temperature=0, use_cache=False)
    assert cached.shape == (2, prompt_length + 30)
    assert torch.equal(cached[:, :prompt_length], prompt)
    assert torch.equal(cached, uncached)
    assert len(set(cached[0, prompt_length:].tolist())) > 2  # not a degenerate constant


@pytest.mark.parametrize(
    "settings",
    [{"temperature": 1.0}, {"temperature": 0.7, "top_k": 5}, {"temperature": 1.3, "top_p": 0.9}],
)
def test_seeded_sampling_is_the_same_with_and_without_cache(settings):
    gpt = model()
    prompt = torch.tensor([[1, 2, 3]])
    texts = [
        generate(
            gpt,
            prompt,
            40,
            generator=torch.Generator().manual_seed(7),
            use_cache=use_cache,
            **settings,
        )
        for use_cache in (True, False)
    ]
    assert torch.equal(*texts)
    other_seed = generate(gpt, prompt, 40, generator=torch.Generator().manual_seed(8), **settings)
    assert not torch.equal(texts[0], other_seed)


def test_the_cache_continues_positions_like_one_long_forward():
    gpt = model()
    idx = torch.randint(13, (1, 9))
    full, _ = gpt(idx)
    caches = new_caches(gpt, 1)
    first, _ = gpt(idx[:, :4], caches=caches)
    rest, _ = gpt(idx[:, 4:], caches=caches)  # several tokens after a cached prefix
    torch.testing.assert_close(torch.cat([first, rest], dim=1), full, rtol=1e-5, atol=1e-5)


def test_top_k_and_top_p_keep_the_right_tokens():
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]]))

    def kept(logits, **settings):
        return torch.isfinite(filter_logits(logits, **settings)).tolist()[0]

    assert kept(logits, top_k=2) == [True, True, False, False]
    assert kept(logits, top_p=0.7) == [True, True, False, False]
    assert kept(logits, top_p=0.5) == [True, False, False, False]
    assert kept(logits, top_p=0.1) == [True, False, False, False]
    assert kept(logits[:, [2, 0, 3, 1]], top_p=0.7) == [False, True, False, True]
    # "the most likely token is always kept", also at top_p = 0, so next_token still samples
    assert kept(logits[:, [2, 0, 3, 1]], top_p=0.0) == [False, True, False, False]
    assert next_token(logits, top_p=0.0).item() == 0


def test_top_k_one_is_greedy():
    gpt = model()
    prompt = torch.tensor([[4]])
    sampled = generate(gpt, prompt, 15, top_k=1, generator=torch.Generator().manual_seed(0))
    assert torch.equal(sampled, generate(gpt, prompt, 15, temperature=0))


@pytest.mark.parametrize(
    "settings, message",
    [
        ({"temperature": -1}, "temperature"),
        ({"top_k": 0}, "top_k"),
        ({"top_p": 1.5}, "top_p"),
    ],
)
def test_bad_sampling_settings_are_clear_errors(settings, message):
    with pytest.raises(ValueError, match=message):
        generate(model(), torch.tensor([[1]]), 3, **settings)


def test_generate_restores_training_mode_also_after_an_error(monkeypatch):
    gpt = model().train()
    gpt.generate(torch.tensor([[1]]), 2)
    assert gpt.training

    def out_of_memory(*args, **kwargs):
        assert not gpt.training  # generation runs in eval mode...
        raise RuntimeError("out of memory")

    monkeypatch.setattr(gpt, "forward", out_of_memory)
    with pytest.raises(RuntimeError, match="out of memory"):
        gpt.generate(torch.tensor([[1]]), 3)
    assert gpt.training  # ...and gives the model back in the mode it came in
