"""Chapter 5 -- Recurrent networks.

Tokenizers turn text into integer ids and back.

:class:`Tokenizer` is the interface every tokenizer of the course fills: ``encode``, ``decode``,
``vocab_size``, ``save`` and ``load``, and :class:`OutOfVocabularyError` for input it has no id
for. :class:`CharTokenizer` is the simplest one -- one id per distinct character of the training
text; the word and letter ``Vocabulary`` of chapters 1-4 (``mini_llm.vocab``) and the byte-pair
encoding of chapter 10 (``mini_llm.bpe_fast``) are the others. Each has a ``kind``, the name saved
files carry, so that ``load_tokenizer`` knows which one to rebuild.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from pathlib import Path

import numpy as np


class OutOfVocabularyError(ValueError):
    """Input a tokenizer has no id for (a character, a token), or an id it has no token for."""

    def __str__(self) -> str:  # a KeyError subclass would otherwise print the message in quotes
        return str(self.args[0]) if self.args else ""


class UnknownCharacterError(OutOfVocabularyError):
    """Text contains a character the tokenizer has no id for."""


class Tokenizer(ABC):
    """What a tokenizer offers: input ↔ ids, its vocabulary size, and saving to a JSON file.

    ``decode(encode(x)) == x`` for any input it accepts: text for the character and BPE
    tokenizers, a sequence of tokens for a ``Vocabulary``. Anything it cannot encode, and any
    id outside ``0 … vocab_size - 1``, raises :class:`OutOfVocabularyError`.
    """

    kind: str  # the name stored in saved files, e.g. "char"

    @property
    @abstractmethod
    def vocab_size(self) -> int: ...

    @abstractmethod
    def encode(self, text: str) -> list[int]: ...

    def encode_array(self, text: str) -> np.ndarray:
        """Ids of ``text`` as an int64 NumPy array."""
        return np.asarray(self.encode(text), dtype=np.int64)

    @abstractmethod
    def decode(self, ids) -> str: ...

    @abstractmethod
    def to_dict(self) -> dict:
        """Everything needed to rebuild the tokenizer, as JSON-ready data."""

    @classmethod
    @abstractmethod
    def from_dict(cls, data: dict) -> Tokenizer: ...

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps({"kind": self.kind, **self.to_dict()}), encoding="utf-8")

    @classmethod
    def load(cls, path: str | Path) -> Tokenizer:
        return load_tokenizer(path)


class CharTokenizer(Tokenizer):
    """One token per character; the vocabulary is the sorted set of characters of a text."""

    kind = "char"

    def __init__(self, chars):
        self.chars = sorted(set(chars))
        if not self.chars:
            raise ValueError(
                "a character tokenizer needs at least one character (is the text empty?)"
            )
        self.char_to_id = {ch: i for i, ch in enumerate(self.chars)}

    @classmethod
    def from_text(cls, text: str) -> CharTokenizer:
        return cls(set(text))

    @property
    def vocab_size(self) -> int:
        return len(self.chars)

    def encode(self, text: str) -> list[int]:
        return self.encode_array(text).tolist()

    def encode_array(self, text: str) -> np.ndarray:
        """Ids of ``text`` as a NumPy array, vectorised so millions of characters take a second."""
        # surrogatepass: a lone surrogate is a code point like any other (known or unknown)
        codes = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
        table = np.full(max(max(map(ord, self.chars)), int(codes.max(initial=0))) + 1, -1, np.int64)
        table[[ord(ch) for ch in self.chars]] = np.arange(len(self.chars))
        ids = table[codes]
        if (ids < 0).any():
            unknown = chr(codes[np.argmax(ids < 0)])
            raise UnknownCharacterError(
                f"character {unknown!r} (U+{ord(unknown):04X}) is not in the tokenizer's "
                f"vocabulary of {self.vocab_size} characters; remove it or retrain on text with it"
            )
        return ids

    def decode(self, ids) -> str:
        ids = [int(i) for i in ids]
        bad = [i for i in ids if not 0 <= i < len(self.chars)]
        if bad:
            raise OutOfVocabularyError(
                f"token id {bad[0]} is outside the vocabulary (0…{len(self.chars) - 1})"
            )
        return "".join(self.chars[i] for i in ids)

    def to_dict(self) -> dict:
        return {"chars": "".join(self.chars)}

    @classmethod
    def from_dict(cls, data: dict) -> CharTokenizer:
        return cls(data["chars"])


def tokenizer_from_dict(data: dict) -> Tokenizer:
    """The tokenizer that :meth:`Tokenizer.to_dict` described, whatever its ``kind``."""
    from mini_llm.bpe_fast import BPETokenizer  # imported here: both modules import this one
    from mini_llm.vocab import Vocabulary

    kinds = {kind.kind: kind for kind in (CharTokenizer, Vocabulary, BPETokenizer)}
    if data.get("kind") not in kinds:
        raise ValueError(
            f"unknown tokenizer kind {data.get('kind')!r}; known kinds: {sorted(kinds)}"
        )
    return kinds[data["kind"]].from_dict(data)


def load_tokenizer(path: str | Path) -> Tokenizer:
    """The tokenizer saved at ``path`` by :meth:`Tokenizer.save`, whatever its kind."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no tokenizer file at {path}")
    return tokenizer_from_dict(json.loads(path.read_text(encoding="utf-8")))
