"""Chapter 10's rendered page: every number its prose states is a glued value shown on the page,
recomputed here with ``mini_llm`` where that is cheap, and every comparison the prose makes
holds for those values."""

from __future__ import annotations

import itertools
import re

import pytest
from _book_helpers import glued_fixture, page_fixture, shown

from mini_llm.bpe_fast import BPETokenizer
from mini_llm.corpus import load_corpus, load_text
from mini_llm.engine.data import training_text
from mini_llm.flops import gpt_flops_per_token
from mini_llm.gpt import GPTConfig
from mini_llm.tokenizer import CharTokenizer, OutOfVocabularyError, UnknownCharacterError
from mini_llm.vocab import UnknownTokenError, Vocabulary, word_tokens

PAGE = "ch10_tokenization"


page = page_fixture(PAGE)
glued = glued_fixture(PAGE, in_prose=False)


@pytest.fixture(scope="module")
def texts():
    text = load_text("shakespeare")
    train = training_text(text)
    return train, text[len(train) :]


@pytest.fixture(scope="module")
def page_bpe(texts):
    """The page's tokenizer, trained again the same way."""
    return BPETokenizer.train(texts[0][:1_500_000], 4096)


def test_out_of_vocabulary_share_is_recomputed(page, glued, texts):
    train, held_out = texts
    words = Vocabulary.from_sequences([word_tokens(train)])
    unseen = [w for w in word_tokens(held_out) if w not in words]
    assert shown(page, glued, "ch10_oov_pct", ".1f") == pytest.approx(
        100 * len(unseen) / len(word_tokens(held_out))
    )
    assert shown(page, glued, "ch10_oov_distinct", ",") == len(set(unseen)) > 0
    _, text = page
    assert "UnknownTokenError: token 'robot' is not in the vocabulary" in text
    assert "UnknownCharacterError: character 'ï' (U+00EF)" in text
    # the output prints both kinds, and they are kinds of the one error the prose names
    assert issubclass(UnknownTokenError, OutOfVocabularyError)
    assert issubclass(UnknownTokenError, KeyError)
    assert issubclass(UnknownCharacterError, OutOfVocabularyError)
    flat = " ".join(text.split())
    assert "tokenizer of mini_llm raises an OutOfVocabularyError for input it has no id" in flat
    assert len(CharTokenizer.from_text(train).chars) == int(
        re.search(r"vocabulary of (\d+) characters", text).group(1)
    )


def test_merges_by_hand_and_pre_tokenization(page, glued):
    _, text = page
    assert "256: b't' + b'h' -> b'th'" in re.sub(r" +", " ", text)
    crossing = shown(page, glued, "ch10_crossing")
    assert crossing > 0  # "without chunks, N of the first 60 merges cross a word boundary"
    assert f"without chunks, {crossing} of 60 merges cross" in text
    assert "with chunks: 0 of 60" in text  # "with them, none can"
    # the prose's example of a crossing merge, e␣, is one the output prints
    assert re.search(r"cross a word boundary, e\.g\.\s+'e ', ", text)
    assert "as in e\u2423: a word" in " ".join(text.split())


def test_fast_training_learns_the_same_merges_faster(page, glued):
    _, text = page
    assert "same merges: True" in text  # what the code printed
    assert "The two versions learn the same merges" in " ".join(text.split())
    assert shown(page, glued, "ch10_speedup", ".0f") > 1  # "the fast version is N times faster"


def test_characters_per_token_curve_and_library(page, glued, texts, page_bpe):
    sizes = [256, 512, 1024, 2048, 4096]
    per_token = {size: shown(page, glued, f"ch10_cpt_{size}", ".2f") for size in sizes}
    assert per_token[256] == 1.0
    sample = texts[1][:150_000]
    assert per_token[4096] == pytest.approx(len(sample) / len(page_bpe.encode(sample)))
    # "each doubling of the vocabulary buys less than the one before"
    gains = [per_token[b] - per_token[a] for a, b in itertools.pairwise(sizes)]
    assert all(g > 0 for g in gains) and gains == sorted(gains, reverse=True)
    library = shown(page, glued, "ch10_cpt_library", ".2f")
    gap = shown(page, glued, "ch10_cpt_gap_pct", ".1f")
    assert gap == pytest.approx(100 * abs(per_token[4096] / library - 1))
    assert gap <= 2  # "compresses about as well"


def test_embedding_share(page, glued):
    gpt2 = GPTConfig(vocab_size=50257, n_embd=768, n_layer=12, n_head=12, block_size=1024)
    assert shown(page, glued, "ch10_gpt2_share_pct", ".0f") == pytest.approx(
        100 * 50257 * 768 / gpt2.parameter_count()
    )
    small = GPTConfig(vocab_size=4096, n_embd=128, n_layer=4, n_head=4, block_size=64)
    share = shown(page, glued, "ch10_small_share_4096_pct", ".0f")
    assert share == pytest.approx(100 * 4096 * 128 / small.parameter_count())
    # "the small model with 4,096 tokens already keeps" more of its weights there than GPT-2
    assert share > glued["ch10_gpt2_share_pct"]

    # Fig. 10.3: "only its embedding passes one half of the weights in the range shown"
    # (V up to 2**16); the share grows with V for both shapes
    def shares(**shape):
        return [
            v * shape["n_embd"] / GPTConfig(vocab_size=v, n_head=4, **shape).parameter_count()
            for v in (2**k for k in range(6, 17))
        ]

    small_curve = shares(n_embd=128, n_layer=4, block_size=64)
    gpt2_curve = shares(n_embd=768, n_layer=12, block_size=1024)
    assert small_curve == sorted(small_curve) and gpt2_curve == sorted(gpt2_curve)
    # "larger for the smaller model at every V" (not "faster": near 2**16 GPT-2's grows faster)
    assert all(small > gpt2 for small, gpt2 in zip(small_curve, gpt2_curve))
    assert max(small_curve) > 0.5 > max(gpt2_curve)
    caption = " ".join(page[1].split())
    assert "is larger for the smaller model at every V: only its embedding passes one half" in (
        caption
    )


def test_char_and_bpe_models_get_the_same_flops_and_the_verdict_matches_the_seeds(page, glued):
    _, text = page
    bpe_steps = shown(page, glued, "ch10_bpe_steps")
    char_steps = shown(page, glued, "ch10_char_steps")
    shape = {"n_layer": 2, "n_head": 2, "n_embd": 64, "block_size": 64}
    chars = int(re.search(r"vocabulary of (\d+) characters", text).group(1))
    ratio = gpt_flops_per_token(GPTConfig(vocab_size=512, **shape)) / gpt_flops_per_token(
        GPTConfig(vocab_size=chars, **shape)
    )
    assert char_steps == round(bpe_steps * ratio) > bpe_steps
    flops = re.findall(r"steps of 16 x 64 tokens, (\S+) training FLOPs", text)
    assert len(flops) == 2 and abs(float(flops[0]) / float(flops[1]) - 1) < 0.01
    seeds = {
        name: [float(v) for v in values.split(", ")]
        for name, values in re.findall(
            r"(characters|BPE 512): .*?seeds: (\d\.\d+, \d\.\d+, \d\.\d+)", text, re.DOTALL
        )
    }
    assert {len(v) for v in seeds.values()} == {3}
    for name, key in (("characters", "char"), ("BPE 512", "bpe")):
        mean = shown(page, glued, f"ch10_bpc_{key}_mean", ".3f")
        assert mean == pytest.approx(sum(seeds[name]) / 3, abs=1e-3)
        shown(page, glued, f"ch10_bpc_{key}_std", ".3f")
    # "every BPE seed ends below every character seed" (the page asserts it too)
    assert max(seeds["BPE 512"]) < min(seeds["characters"])
    assert "every BPE seed ends below every character seed" in " ".join(text.split())


def test_artefacts(page, glued, texts, page_bpe):
    tokenizer_text = texts[0][:1_500_000]  # what the page's tokenizer learned from
    assert shown(page, glued, "ch10_king_tokens") == 3
    frequent, rare = glued["ch10_frequent_name"], glued["ch10_rare_name"]
    assert shown(page, glued, "ch10_frequent_name") == tokenizer_text.count(" Coriolanus")
    assert shown(page, glued, "ch10_rare_name") == tokenizer_text.count(" Volumnia")
    frequent_tokens = len(page_bpe.encode(" Coriolanus"))
    rare_tokens = shown(page, glued, "ch10_rare_name_tokens")
    assert glued["ch10_frequent_name_tokens"] == frequent_tokens == 1
    assert rare_tokens == len(page_bpe.encode(" Volumnia")) > 1
    assert frequent > rare == 1  # "one token or many by frequency"; "there 1 time"
    assert shown(page, glued, "ch10_digits") == sum(c.isdigit() for c in tokenizer_text)
    # the printed count is the same text's, so output and prose agree
    _, text = page
    assert f"digits in the tokenizer's training text: {glued['ch10_digits']}" in text.replace(
        "\u2019", "'"
    )
    assert shown(page, glued, "ch10_year_tokens") == len(page_bpe.encode("1599")) == 4
    # "so no merge joins two of them"
    pieces = page_bpe.token_strings()
    digit_merge = any(pieces[a].isdigit() and pieces[b].isdigit() for a, b in page_bpe.merges)
    assert not digit_merge
    flat = " ".join(text.split())
    assert (
        "so no merge joins two of them, and \u201c1599\u201d takes 4 tokens, one per digit" in flat
    )
    assert f"{frequent} times) is 1 token," in flat


def test_the_sizes_the_prose_names(page, glued, texts, page_bpe):
    train, held_out = texts
    assert shown(page, glued, "ch10_n_plays") == len(load_corpus("shakespeare")) > 30
    # "the first 90 % of the characters are for training": training_text's cut, measured
    share = shown(page, glued, "ch10_train_pct", ".0f")
    assert share == pytest.approx(100 * len(train) / (len(train) + len(held_out)))
    assert f"the first {share:.0f} % of the characters" in " ".join(page[1].split())
    assert f"{share:.0f} % cut" in " ".join(page[1].split())
    assert shown(page, glued, "ch10_tokenizer_chars", ",") == 1_500_000 < len(train)
    assert shown(page, glued, "ch10_tokenizer_bytes", ",") == len(train[:1_500_000].encode("utf-8"))
    merges = shown(page, glued, "ch10_tokenizer_merges", ",")
    assert merges == len(page_bpe.merges) == shown(page, glued, "ch10_tokenizer_vocab", ",") - 256
    assert shown(page, glued, "ch10_bpc_train_chars", ",") <= len(train)
    assert shown(page, glued, "ch10_bpc_test_chars", ",") <= len(held_out)


def test_figures_and_diagram_are_referred_to(page, built_book):
    raw, text = page
    for number in range(1, 5):
        assert f"Fig. 10.{number}" in text
    diagram = re.search(r'<object data="([^"]+\.svg)"[^>]*class="graphviz"', raw)
    assert diagram, "the diagram is not rendered"
    assert "<svg" in (built_book / diagram.group(1)).read_text(encoding="utf-8")
