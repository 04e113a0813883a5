"""Vocabularies map tokens to ids and back, and refuse tokens they never saw."""

import numpy as np
import pytest

from mini_llm.vocab import BOS, EOS, UnknownTokenError, Vocabulary, word_tokens


def test_specials_come_first_then_sorted_tokens():
    vocab = Vocabulary.from_sequences(["cab", "ba"])
    assert vocab.itos == [BOS, EOS, "a", "b", "c"]
    assert vocab.stoi["c"] == 4 and len(vocab) == 5 and "a" in vocab


def test_encode_decode_round_trip():
    vocab = Vocabulary.from_sequences(["hello", "world"])
    ids = vocab.encode("hello")
    assert ids.dtype == np.int64
    assert "".join(vocab.decode(ids)) == "hello"
    framed = vocab.encode_with_boundaries("ow")
    assert vocab.decode(framed) == [BOS, "o", "w", EOS]


def test_unknown_token_error_names_the_token():
    vocab = Vocabulary.from_sequences(["abc"])
    with pytest.raises(UnknownTokenError, match="token 'z' is not in the vocabulary"):
        vocab.encode("abz")


def test_empty_corpus_is_an_error():
    with pytest.raises(ValueError, match="empty corpus"):
        Vocabulary.from_sequences([[], []])


def test_word_tokens_lower_case_words_with_apostrophes():
    assert word_tokens("O, 'tis the King's GOOD hour!") == [
        "o",
        "tis",
        "the",
        "king's",
        "good",
        "hour",
    ]
