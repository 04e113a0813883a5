"""Byte-level BPE: the plain algorithm on hand-checked examples, the fast tokenizer against it,
exact round trips on any text, the library tokenizer's compression, and the whole pipeline
(prepare, train, sample) on BPE data."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mini_llm import bpe
from mini_llm.bpe import count_pairs, decode, encode, merge, pretokenize, train_bpe
from mini_llm.bpe_fast import BPETokenizer, train_bpe_fast
from mini_llm.cli import main
from mini_llm.corpus import load_corpus, load_text
from mini_llm.engine.data import load_meta, load_split, load_tokenizer_of, prepare, training_text
from mini_llm.tokenizer import CharTokenizer, OutOfVocabularyError, Tokenizer, load_tokenizer
from mini_llm.vocab import UnknownTokenError, Vocabulary

A, B, C, D, SPACE = 97, 98, 99, 100, 32


# ------------------------------------------------------------------ the plain algorithm
def test_count_pairs_counts_overlapping_pairs():
    assert count_pairs([A, A, A]) == {(A, A): 2}
    assert count_pairs([A, B, A, B]) == {(A, B): 2, (B, A): 1}
    assert count_pairs([A]) == {} and count_pairs([]) == {}


def test_merge_goes_left_to_right_and_never_reuses_a_token():
    assert merge([A, A, A], (A, A), 256) == [256, A]
    assert merge([A, A, A, A], (A, A), 256) == [256, 256]
    assert merge([A, B, C, A, B], (A, B), 300) == [300, C, 300]
    assert merge([A, B], (B, C), 300) == [A, B]


def test_train_bpe_by_hand_including_a_tie():
    # aa occurs 4 times; then (97, 98) and (256, 97) both twice: the smaller pair wins the tie;
    # then (256, 257) twice; then every pair once: the smallest, (97, 99).
    merges = train_bpe("aaabdaaabac", 260)
    assert list(merges.items()) == [((A, A), 256), ((A, B), 257), ((256, 257), 258), ((A, C), 259)]
    assert encode("aaab", merges) == [258]
    assert encode("aaabdaaabac", merges) == [258, D, 258, 259]
    assert decode([258, D, 258, 259], merges) == "aaabdaaabac"


def test_encoding_applies_merges_in_the_order_they_were_learned():
    # "bc" is merged before "ab": "abc" must become a + bc, though ab also has a merge.
    merges = {(B, C): 256, (A, B): 257}
    assert encode("abc", merges) == [A, 256]
    assert encode("abab", merges) == [257, 257]


def test_pairs_never_cross_a_pre_tokenization_boundary():
    assert pretokenize("the tree's 42 leaves!!\n\n") == [
        "the",
        " tree",
        "'s",
        " 42",
        " leaves",
        "!!",
        "\n\n",
    ]
    merges = train_bpe("a a a a b b", 300)
    assert all(SPACE != pair[1] for pair in merges), "a merge ends in a space: it crossed chunks"
    assert (SPACE, A) in merges


def test_training_stops_when_no_pair_is_left_and_refuses_a_vocabulary_below_the_bytes():
    assert train_bpe("ab ab", 1000) == {(A, B): 256, (SPACE, 256): 257}
    assert BPETokenizer.train("ab ab", 1000).merges == {(A, B): 256, (SPACE, 256): 257}
    with pytest.raises(ValueError, match="at least 256"):
        train_bpe("ab", 100)
    with pytest.raises(ValueError, match="at least 256"):
        train_bpe_fast("ab", 100)
    with pytest.raises(ValueError, match="below the 256 bytes"):
        BPETokenizer.train("ab", 256, specials=["<|endoftext|>"])


# ------------------------------------------------------------------ fast == plain
def same_merges(text: str, vocab_size: int) -> bool:
    """The fast and the plain trainer learn the same merges, in the same order."""
    fast = train_bpe_fast(text, vocab_size)
    return list(fast.items()) == list(train_bpe(text, vocab_size).items())


TIES_AND_REPEATS = [
    "aaabdaaabac",
    "low lower lowest newer newest wider wide",
    "abababab aaaa bbbb abab",
    # after " a" -> 256: (256, b), (256, c), (256, d) tie, sharing the new first id
    " ab ac ad ab ac ad",
    "xy xy xz xz yx yx zz zz",  # every pair twice: each step is a tie
    "the cat the cat the cat sat on the mat",  # repeated chunks, counted once each
    "Ça va? Ça va très bien, merci. 東京 東京都 🙂🙂🙂",
]


@pytest.mark.parametrize("text", TIES_AND_REPEATS)
def test_fast_training_learns_the_plain_merges(text):
    assert same_merges(text, 300)


def test_a_tie_between_pairs_of_a_new_id_goes_to_the_smallest():
    assert list(train_bpe_fast(" ab ac ad ab ac ad", 258)) == [(SPACE, A), (256, B)]


# texts made of a few chunks repeated in any order: many equal counts, many merges
REPEATED_CHUNKS = st.lists(
    st.sampled_from(["ab", " ab", " aab", "ba", " abab", " aaaa", " b", "\n", "!!"]),
    max_size=40,
).map("".join)


@settings(max_examples=40, deadline=None)
@given(REPEATED_CHUNKS | st.text(alphabet="ab c\n", max_size=60), st.integers(256, 300))
def test_fast_equals_plain_on_generated_texts(text, vocab_size):
    assert same_merges(text, vocab_size)


def test_fast_equals_plain_on_shakespeare_and_encodes_the_same():
    text = load_text("shakespeare")[200_000:220_000]
    assert same_merges(text, 256 + 64)
    merges = train_bpe_fast(text, 256 + 64)
    held_out = load_corpus("shakespeare")[1][:3000]
    assert BPETokenizer(merges).encode(held_out) == encode(held_out, merges)


# ------------------------------------------------------------------ round trips
@pytest.fixture(scope="module")
def shakespeare_tokenizer():
    return BPETokenizer.train(load_text("shakespeare")[:1_000_000], 1024)


ANY_CHARACTER = st.characters(codec=None, categories=None)  # every code point, surrogates too


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=ANY_CHARACTER))
def test_round_trip_on_arbitrary_unicode(shakespeare_tokenizer, text):
    assert shakespeare_tokenizer.decode(shakespeare_tokenizer.encode(text)) == text


@pytest.mark.parametrize(
    "text",
    [
        "",
        "e\u0301 n\u0303 \u0915\u093f",  # combining accents, a Devanagari vowel sign
        "👩‍👩‍👧 🇫🇷 👍🏽",  # emoji joined by zero-width joiners, a flag, a skin tone
        "a\x00b\x00",  # NUL
        "lone \ud800 and \udfff surrogates",
        "\r\n\t   \u2028 trailing spaces   ",
    ],
)
def test_round_trip_on_hard_cases(shakespeare_tokenizer, text):
    ids = shakespeare_tokenizer.encode(text)
    assert shakespeare_tokenizer.decode(ids) == text
    assert all(0 <= i < shakespeare_tokenizer.vocab_size for i in ids)


def test_round_trip_on_all_38_plays(shakespeare_tokenizer):
    plays = load_corpus("shakespeare")
    assert len(plays) == 38
    for play in plays:
        ids = shakespeare_tokenizer.encode(play)
        assert shakespeare_tokenizer.decode(ids) == play
        assert len(ids) < len(play) / 2  # and it compresses: more than 2 characters per token


def test_ids_that_are_not_utf8_decode_to_replacement_characters(shakespeare_tokenizer):
    assert shakespeare_tokenizer.decode([0xE2, A]) == "\ufffda"  # a cut-off 3-byte character
    with pytest.raises(OutOfVocabularyError, match="token id 1024 is outside the vocabulary"):
        shakespeare_tokenizer.decode([A, 1024])
    with pytest.raises(OutOfVocabularyError, match="token id -1"):
        decode([-1], {})


def test_special_tokens_are_whole_tokens_only_when_asked_for():
    tokenizer = BPETokenizer.train("one two three " * 5, 262, specials=["<|endoftext|>"])
    end = tokenizer.specials["<|endoftext|>"]
    assert end == tokenizer.vocab_size - 1 == 261
    text = "one<|endoftext|>two"
    with_specials = tokenizer.encode(text, specials=True)
    assert with_specials.count(end) == 1
    assert end not in tokenizer.encode(text)  # plain text: the marker is just characters
    assert tokenizer.decode(with_specials) == tokenizer.decode(tokenizer.encode(text)) == text


def test_the_encode_cache_does_not_change_results(shakespeare_tokenizer):
    text = load_corpus("shakespeare")[5][:20_000]
    first = shakespeare_tokenizer.encode(text)
    assert shakespeare_tokenizer.encode(text) == first == encode(text, shakespeare_tokenizer.merges)


# ------------------------------------------------------------------ against the library
def test_characters_per_token_within_2_percent_of_hugging_face_tokenizers():
    from tokenizers import Tokenizer as HFTokenizer
    from tokenizers import models, pre_tokenizers, trainers

    text = load_text("shakespeare")[:1_500_000]
    ours = BPETokenizer.train(text, 2048)
    theirs = HFTokenizer(models.BPE())
    theirs.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(
        vocab_size=2048, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False
    )
    theirs.train_from_iterator([text], trainer)
    assert theirs.get_vocab_size() == ours.vocab_size == 2048
    ours_cpt = len(text) / len(ours.encode(text))
    theirs_cpt = len(text) / len(theirs.encode(text).ids)
    assert ours_cpt > 2.5
    assert abs(ours_cpt / theirs_cpt - 1) <= 0.02


# ------------------------------------------------------------------ one interface
def tokenizers_of_the_package():
    return [
        (CharTokenizer.from_text("hello world"), "hello world"),
        (Vocabulary.from_sequences(["hello", "world"]), list("hello")),
        (BPETokenizer.train("hello world, hello you", 270), "héllo 🙂"),
    ]


@pytest.mark.parametrize("tokenizer, example", tokenizers_of_the_package())
def test_every_tokenizer_answers_the_same_calls(tokenizer, example, tmp_path):
    assert isinstance(tokenizer, Tokenizer)
    ids = tokenizer.encode(example)
    assert list(tokenizer.decode(ids)) == list(example)
    assert tokenizer.encode_array(example).tolist() == list(ids)
    tokenizer.save(tmp_path / "tokenizer.json")
    again = load_tokenizer(tmp_path / "tokenizer.json")
    assert type(again) is type(tokenizer) and again.vocab_size == tokenizer.vocab_size
    assert list(again.encode(example)) == list(ids)
    with pytest.raises(OutOfVocabularyError, match=f"token id {tokenizer.vocab_size} is outside"):
        tokenizer.decode([tokenizer.vocab_size])


def test_unknown_input_is_one_error_type_and_the_old_names_still_catch_it():
    with pytest.raises(OutOfVocabularyError, match="'z'"):
        CharTokenizer.from_text("abc").encode("abz")
    with pytest.raises(OutOfVocabularyError, match="U\\+D800"):  # a lone surrogate, too
        CharTokenizer.from_text("abc").encode("a\ud800")
    assert CharTokenizer.from_text("a\ud800").encode("\ud800a") == [1, 0]
    with pytest.raises(OutOfVocabularyError, match="'robot'") as caught:
        Vocabulary.from_sequences([["a", "robot?"]]).encode(["robot"])
    assert isinstance(caught.value, (KeyError, UnknownTokenError))
    assert str(caught.value).startswith("token 'robot'")  # not in KeyError's quotes
    assert isinstance(OutOfVocabularyError("x"), ValueError)


def test_saved_bpe_is_readable_json(tmp_path, shakespeare_tokenizer):
    shakespeare_tokenizer.save(tmp_path / "bpe.json")
    data = json.loads((tmp_path / "bpe.json").read_text(encoding="utf-8"))
    assert data["kind"] == "bpe" and data["pattern"] == bpe.SPLIT_PATTERN
    assert data["merges"][0] == "{} {}".format(*next(iter(shakespeare_tokenizer.merges)))
    assert (
        data["tokens"][256] == shakespeare_tokenizer.decode([256]) and len(data["tokens"]) == 1024
    )
    data["pattern"] = r"\w+"
    with pytest.raises(ValueError, match="another pre-tokenization pattern"):
        BPETokenizer.from_dict(data)


# ------------------------------------------------------------------ the pipeline
def test_prepare_with_bpe_keeps_the_validation_text_out_of_the_tokenizer(tmp_path):
    text = load_corpus("shakespeare")[3]
    tokenizer = BPETokenizer.train(training_text(text), 400)
    meta = prepare(text, tmp_path, tokenizer=tokenizer)
    train, val = load_split(tmp_path, "train"), load_split(tmp_path, "val")
    again = load_tokenizer_of(tmp_path)
    assert again.decode(train) == training_text(text)
    assert again.decode(val) == text[len(training_text(text)) :]
    assert meta["train_characters"] / len(train) > 1.5  # tokens, not characters, fill the files
    assert np.asarray(train).max() >= 256


def test_cli_prepares_trains_and_samples_on_bpe_data(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["prepare", "--corpus", "names", "--tokenizer", "bpe", "--vocab-size", "300"]) == 0
    out = capsys.readouterr().out
    assert "data/prepared/names-bpe300" in out and "byte-level BPE (300 tokens)" in out
    assert load_meta("data/prepared/names-bpe300")["vocab_size"] == 300
    tiny = ["n_layer=1", "n_head=2", "n_embd=32", "block_size=16", "batch_size=4"]
    tiny += ["max_iters=4", "eval_interval=2", "eval_iters=1", "warmup_iters=1", "progress=false"]
    args = ["train", "--data", "data/prepared/names-bpe300", "--out", "run", "corpus=names"]
    assert main([*args, *tiny]) == 0
    assert (
        main(["sample", "--checkpoint", "run/ckpt.pt", "--prompt", "mar", "--max-new-tokens", "5"])
        == 0
    )
    sampled = capsys.readouterr().out.strip().splitlines()[-1]
    assert sampled.startswith("mar") and len(sampled) > 3

    assert main(["prepare", "--corpus", "names"]) == 0  # the same corpus, characters this time
    args = ["train", "--data", "data/prepared/names-char", "--out", "run", "--resume"]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "encoded with char" in err and "byte-level BPE (300 tokens)" in err

    assert main(["prepare", "--corpus", "names", "--vocab-size", "300"]) == 2
    assert "--vocab-size applies to --tokenizer bpe only" in capsys.readouterr().err
    assert main(["prepare", "--corpus", "names", "--tokenizer", "bpe", "--vocab-size", "200"]) == 2
    assert "--vocab-size must be in 257…65536" in capsys.readouterr().err
