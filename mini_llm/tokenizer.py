"""Tokenizers turn text into integer ids and back.

:class:`Tokenizer` is the interface every tokenizer of the course fills: ``encode``, ``decode``,
``vocab_size``, ``save`` and ``load``. :class:`CharTokenizer` is the simplest one -- one id per
distinct character of the training text. The byte-pair-encoding tokenizer of the tokenization
chapter registers itself in ``TOKENIZERS`` under its own ``kind`` so ``load_tokenizer`` can read it.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from pathlib import Path

import numpy as np


class UnknownCharacterError(ValueError):
    """Text contains a character the tokenizer has no id for."""


class Tokenizer(ABC):
    """What a tokenizer offers: text ↔ ids, its vocabulary size, and saving to a JSON file."""

    kind: str  # the name stored in saved files, e.g. "char"

    @property
    @abstractmethod
    def vocab_size(self) -> int: ...

    @abstractmethod
    def encode(self, text: str) -> list[int]: ...

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
        codes = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)
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
            raise ValueError(
                f"token id {bad[0]} is outside the vocabulary (0…{len(self.chars) - 1})"
            )
        return "".join(self.chars[i] for i in ids)

    def to_dict(self) -> dict:
        return {"chars": "".join(self.chars)}

    @classmethod
    def from_dict(cls, data: dict) -> CharTokenizer:
        return cls(data["chars"])


TOKENIZERS: dict[str, type[Tokenizer]] = {"char": CharTokenizer}


def tokenizer_from_dict(data: dict) -> Tokenizer:
    kind = data.get("kind")
    if kind not in TOKENIZERS:
        raise ValueError(f"unknown tokenizer kind {kind!r}; known kinds: {sorted(TOKENIZERS)}")
    return TOKENIZERS[kind].from_dict(data)


def load_tokenizer(path: str | Path) -> Tokenizer:
    """The tokenizer saved at ``path`` by :meth:`Tokenizer.save`, whatever its kind."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no tokenizer file at {path}")
    return tokenizer_from_dict(json.loads(path.read_text(encoding="utf-8")))
