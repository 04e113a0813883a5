"""Character tokenizer, prepared token files and random-window batches."""

import json

import numpy as np
import pytest
import torch

from mini_llm.engine.data import (
    RandomBatches,
    load_split,
    load_tokenizer_of,
    prepare,
    training_text,
)
from mini_llm.tokenizer import CharTokenizer, Tokenizer, UnknownCharacterError, load_tokenizer

TEXT = "To be, or not to be: that is the question.\n" * 20


def test_char_tokenizer_round_trip_and_vocabulary():
    tok = CharTokenizer.from_text(TEXT)
    assert isinstance(tok, Tokenizer)
    assert tok.vocab_size == len(set(TEXT))
    assert tok.decode(tok.encode("to be")) == "to be"
    assert tok.encode("\n ") == [0, 1]  # sorted by code point: newline, then space
    assert tok.encode_array(TEXT).tolist() == tok.encode(TEXT)


def test_unknown_character_is_named_in_the_error():
    tok = CharTokenizer.from_text(TEXT)
    with pytest.raises(UnknownCharacterError, match=r"character 'Z' \(U\+005A\) is not in"):
        tok.encode("to beZ")
    with pytest.raises(UnknownCharacterError, match="'é'"):
        tok.encode("é")
    with pytest.raises(ValueError, match="outside the vocabulary"):
        tok.decode([999])


def test_tokenizer_saves_and_loads(tmp_path):
    tok = CharTokenizer.from_text("héllo\n")
    tok.save(tmp_path / "tok.json")
    again = load_tokenizer(tmp_path / "tok.json")
    assert again.chars == tok.chars and again.encode("hé\n") == tok.encode("hé\n")
    assert json.loads((tmp_path / "tok.json").read_text())["kind"] == "char"


def test_prepare_writes_uint16_splits_and_meta(tmp_path):
    meta = prepare(TEXT, tmp_path, val_fraction=0.1, corpus="shakespeare")
    assert (meta["corpus"], meta["val_fraction"]) == ("shakespeare", 0.1)  # runs check both
    train, val = load_split(tmp_path, "train"), load_split(tmp_path, "val")
    assert train.dtype == np.uint16 and isinstance(train, np.memmap)
    assert len(train) == meta["train_tokens"] == int(len(TEXT) * 0.9)
    assert len(train) + len(val) == len(TEXT)
    tok = load_tokenizer_of(tmp_path)
    assert tok.decode(np.concatenate([train, val]).tolist()) == TEXT  # val is the end of the text


def test_prepare_and_load_errors(tmp_path):
    with pytest.raises(ValueError, match="empty"):
        prepare("", tmp_path)
    with pytest.raises(FileNotFoundError, match="mini-llm prepare"):
        load_split(tmp_path / "nothing", "train")


def test_an_interrupted_prepare_leaves_no_meta_of_other_token_files(tmp_path, monkeypatch):
    prepare(TEXT, tmp_path, corpus="shakespeare")
    other, encode_array = "a b c\n" * 50, CharTokenizer.encode_array

    def interrupted(self, text):  # Ctrl-C once the train split is written
        if text != training_text(other, 0.1):
            raise KeyboardInterrupt
        return encode_array(self, text)

    monkeypatch.setattr(CharTokenizer, "encode_array", interrupted)
    with pytest.raises(KeyboardInterrupt):
        prepare(other, tmp_path, corpus="names")
    assert len(np.fromfile(tmp_path / "train.bin", np.uint16)) == int(len(other) * 0.9)
    with pytest.raises(FileNotFoundError, match="missing meta.json"):
        load_split(tmp_path, "train")  # not the shakespeare meta beside names' tokens


def test_random_batches_are_shifted_windows_and_resume_exactly():
    tokens = np.arange(1000, dtype=np.uint16)
    batches = RandomBatches(tokens, block_size=8, batch_size=4, seed=1)
    x, y = batches()
    assert x.shape == y.shape == (4, 8) and x.dtype == torch.long
    assert torch.equal(y, x + 1)  # tokens are consecutive numbers: target = next one
    state = batches.state_dict()
    expected = [batches() for _ in range(3)]
    batches.load_state_dict(state)
    for ex, got in zip(expected, [batches() for _ in range(3)], strict=True):
        assert torch.equal(ex[0], got[0])
    with pytest.raises(ValueError, match="^the val split: 5 tokens are too few"):
        RandomBatches(tokens[:5], block_size=8, batch_size=2, name="the val split")
