"""Chapter 1 -- Bigram language models by counting.

Vocabularies: the fixed list of tokens a model knows, and the integer id of each.

Models work with integers, people with strings; a ``Vocabulary`` translates in both directions
and refuses, with a clear message, a token it has never seen. It is a
:class:`~mini_llm.tokenizer.Tokenizer` whose input is a sequence of tokens (a string is the
sequence of its characters) and whose ``decode`` gives that sequence back as a list.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

import numpy as np

from mini_llm.tokenizer import OutOfVocabularyError, Tokenizer

BOS = "<s>"
"""Begin-of-sequence token: the context before the first real token."""
EOS = "</s>"
"""End-of-sequence token: predicting it is how a model decides to stop."""

_WORD = re.compile(r"[a-z]+(?:'[a-z]+)*")


def word_tokens(text: str) -> list[str]:
    """Lower-case words of ``text``; punctuation and numbers are dropped (``"O, 'tis"`` -> o, tis)."""
    return _WORD.findall(text.lower())


class UnknownTokenError(OutOfVocabularyError, KeyError):
    """A token that is not in the vocabulary (still a ``KeyError``, as it was before chapter 10
    gave every tokenizer :class:`OutOfVocabularyError`)."""


class Vocabulary(Tokenizer):
    """Tokens in a fixed order; ``stoi`` maps token -> id and ``itos`` id -> token."""

    kind = "vocab"

    def __init__(self, tokens: Iterable[str], specials: Sequence[str] = ()):
        self.itos: list[str] = list(dict.fromkeys([*specials, *tokens]))
        self.stoi: dict[str, int] = {token: i for i, token in enumerate(self.itos)}

    @classmethod
    def from_sequences(
        cls, sequences: Iterable[Iterable[str]], specials: Sequence[str] = (BOS, EOS)
    ) -> Vocabulary:
        """Every distinct token of ``sequences`` in sorted order, after the special tokens."""
        seen: set[str] = set()
        for sequence in sequences:
            seen.update(sequence)
        if not seen:
            raise ValueError("cannot build a vocabulary from an empty corpus")
        return cls(sorted(seen - set(specials)), specials)

    def __len__(self) -> int:
        return len(self.itos)

    @property
    def vocab_size(self) -> int:
        return len(self.itos)

    def __contains__(self, token: str) -> bool:
        return token in self.stoi

    def __repr__(self) -> str:
        shown = ", ".join(map(repr, self.itos[:8]))
        more = ", ..." if len(self) > 8 else ""
        return f"Vocabulary({len(self)} tokens: {shown}{more})"

    def encode(self, tokens: Iterable[str]) -> np.ndarray:
        """Ids of ``tokens`` as an int64 array; an unknown token raises ``UnknownTokenError``."""
        try:
            return np.array([self.stoi[token] for token in tokens], dtype=np.int64)
        except KeyError as err:
            raise UnknownTokenError(
                f"token {err.args[0]!r} is not in the vocabulary ({len(self)} tokens, e.g. "
                f"{', '.join(map(repr, self.itos[:5]))}); a counting model cannot score "
                "a token it never saw"
            ) from None

    def decode(self, ids: Iterable[int]) -> list[str]:
        """Tokens of ``ids``; an id outside the vocabulary raises ``OutOfVocabularyError``."""
        ids = [int(i) for i in ids]
        bad = [i for i in ids if not 0 <= i < len(self.itos)]
        if bad:
            raise OutOfVocabularyError(
                f"token id {bad[0]} is outside the vocabulary (0…{len(self.itos) - 1})"
            )
        return [self.itos[i] for i in ids]

    def encode_with_boundaries(self, tokens: Iterable[str]) -> np.ndarray:
        """Ids of ``<s> tokens </s>``: the form a model with boundary tokens is trained on."""
        return self.encode([BOS, *tokens, EOS])

    def to_dict(self) -> dict:
        return {"tokens": self.itos}

    @classmethod
    def from_dict(cls, data: dict) -> Vocabulary:
        return cls(data["tokens"])
