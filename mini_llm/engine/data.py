"""Token data for training: prepare a corpus once into memory-mapped files, then draw batches.

``prepare`` splits the text (the first 90 % of its characters for training, the rest for
validation, so validation text is text the model never trained on), encodes each part and
writes::

    <out_dir>/train.bin   token ids, uint16, one after another
    <out_dir>/val.bin
    <out_dir>/meta.json   the tokenizer and the sizes

Training then reads windows straight from the ``.bin`` files through ``numpy.memmap``: nothing
is loaded in full, and the same files serve any number of runs.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch

from mini_llm.tokenizer import CharTokenizer, Tokenizer, tokenizer_from_dict

SPLITS = ("train", "val")


def check_val_fraction(val_fraction: float) -> None:
    """The share of the text kept for validation: some, and not all of it."""
    if not 0 < val_fraction < 1:
        raise ValueError(
            f"val_fraction must be between 0 and 1 (the share kept for validation), "
            f"got {val_fraction}"
        )


def training_text(text: str, val_fraction: float = 0.1) -> str:
    """The part of ``text`` that :func:`prepare` keeps for training: a tokenizer learned from
    it (BPE) has never seen the validation text either."""
    check_val_fraction(val_fraction)
    return text[: int(len(text) * (1 - val_fraction))]


def prepare(
    text: str,
    out_dir: str | Path,
    val_fraction: float = 0.1,
    tokenizer: Tokenizer | None = None,
    corpus: str | None = None,
) -> dict:
    """Encode ``text`` into ``out_dir``; return the meta data written to ``meta.json``.

    Without a ``tokenizer``, a :class:`CharTokenizer` is built from the text. ``corpus``, the
    name the text came from, is recorded so that a run can check it trains on what it asked for.
    """
    if not text:
        raise ValueError("the text to prepare is empty")
    train_text = training_text(text, val_fraction)
    tokenizer = tokenizer or CharTokenizer.from_text(text)
    if tokenizer.vocab_size > 2**16:
        raise ValueError(f"vocab_size {tokenizer.vocab_size} does not fit the uint16 token files")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    # meta.json is what makes the folder usable, so it goes first and comes back last: an
    # interrupted run leaves a folder that says it is not prepared, never an earlier
    # meta.json beside token files of another text or tokenizer
    (out_dir / "meta.json").unlink(missing_ok=True)
    sizes = {}
    for split, part in zip(SPLITS, (train_text, text[len(train_text) :])):
        ids = tokenizer.encode_array(part).astype(np.uint16)
        ids.tofile(out_dir / f"{split}.bin")
        sizes[f"{split}_tokens"] = len(ids)
    meta = {
        "tokenizer": {"kind": tokenizer.kind, **tokenizer.to_dict()},
        "vocab_size": tokenizer.vocab_size,
        "dtype": "uint16",
        **sizes,
        "train_characters": len(train_text),
        "val_characters": len(text) - len(train_text),
        "val_fraction": val_fraction,
        **({"corpus": corpus} if corpus else {}),
    }
    (out_dir / "meta.json").write_text(json.dumps(meta, indent=1), encoding="utf-8")
    return meta


def load_meta(data_dir: str | Path) -> dict:
    path = Path(data_dir) / "meta.json"
    if not path.is_file():
        raise FileNotFoundError(
            f"no prepared data in {data_dir} (missing meta.json); run `mini-llm prepare` first"
        )
    return json.loads(path.read_text(encoding="utf-8"))


def load_tokenizer_of(data_dir: str | Path) -> Tokenizer:
    return tokenizer_from_dict(load_meta(data_dir)["tokenizer"])


def load_split(data_dir: str | Path, split: str) -> np.memmap:
    """The token ids of ``split`` ("train" or "val"), memory-mapped, read-only."""
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    load_meta(data_dir)
    return np.memmap(Path(data_dir) / f"{split}.bin", dtype=np.uint16, mode="r")


class RandomBatches:
    """Random windows of a token array: call it to get ``(x, y)`` with y = x shifted by one.

    Each call draws ``batch_size`` start positions with its own ``torch.Generator``; its state is
    part of a checkpoint (``state_dict``), so a resumed run draws exactly the batches the
    uninterrupted run would have. ``name`` says in errors which tokens these are (e.g. a split).
    """

    def __init__(
        self,
        tokens: np.ndarray,
        block_size: int,
        batch_size: int,
        device: str | torch.device = "cpu",
        seed: int = 0,
        name: str = "the tokens",
    ):
        if len(tokens) < block_size + 1:
            raise ValueError(
                f"{name}: {len(tokens)} tokens are too few for windows of block_size={block_size} "
                "(need at least block_size + 1); use a smaller block_size or more text"
            )
        self.tokens = tokens
        self.block_size = block_size
        self.batch_size = batch_size
        self.device = torch.device(device)
        self.generator = torch.Generator().manual_seed(seed)

    def __call__(self) -> tuple[torch.Tensor, torch.Tensor]:
        starts = torch.randint(
            len(self.tokens) - self.block_size, (self.batch_size,), generator=self.generator
        ).tolist()
        windows = np.stack([self.tokens[s : s + self.block_size + 1] for s in starts])
        windows = torch.from_numpy(windows.astype(np.int64))
        if self.device.type == "cuda":  # page-locked memory lets the copy overlap with compute
            windows = windows.pin_memory().to(self.device, non_blocking=True)
        else:
            windows = windows.to(self.device)
        return windows[:, :-1], windows[:, 1:]

    def state_dict(self) -> dict:
        return {"generator": self.generator.get_state()}

    def load_state_dict(self, state: dict) -> None:
        self.generator.set_state(state["generator"])
