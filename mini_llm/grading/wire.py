"""Plain data across the boundary between the trusted grader and the student's process.

Only data crosses: JSON for numbers, strings, lists and dicts, and NumPy arrays as ``.npy``
bytes read back with ``allow_pickle=False``. Nothing is unpickled and no object of the other
side is ever called, so a submission can hand back wrong answers but never code. Values that
are not plain data stay in the student's process and cross as a numbered handle.

Both sides use this module; the trusted side decodes with ``decode(..., trusted=True)``, which
also rebuilds random generators and torch tensors only from validated plain fields.
"""

from __future__ import annotations

import base64
import io
import json
import os
import select
import struct
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

MAX_MESSAGE_BYTES = 128 * 2**20  # a larger reply is refused, not read
MAX_ITEMS = 1_000_000
"""the most JSON values a message may hold (counted from its commas and brackets before it
is parsed): a reply of small nested values would otherwise cost about 50 times its size in
memory to decode, while arrays cross as base64 text, which has neither"""
_HEADER = struct.Struct("!Q")
_BIT_GENERATORS = {"PCG64", "PCG64DXSM", "MT19937", "Philox", "SFC64"}


class WireError(Exception):
    """The other side sent something that is not a well-formed message."""


def send(fd: int, message: dict) -> None:
    data = json.dumps(message, allow_nan=True).encode()
    payload = _HEADER.pack(len(data)) + data
    view = memoryview(payload)
    while view:
        view = view[os.write(fd, view) :]


def read_exact(fd: int, size: int, deadline: float | None = None) -> bytes:
    """``size`` bytes from ``fd``; ``TimeoutError`` if they have not all come by ``deadline``."""
    chunks, left = [], size
    while left:
        if deadline is not None:
            ready, _, _ = select.select([fd], [], [], max(deadline - time.monotonic(), 0))
            if not ready:
                raise TimeoutError("no reply in time")
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            raise EOFError("the other side closed the channel")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def receive(fd: int, deadline: float | None = None) -> dict:
    (size,) = _HEADER.unpack(read_exact(fd, _HEADER.size, deadline))
    if size > MAX_MESSAGE_BYTES:
        raise WireError(f"a message of {size} bytes is over the {MAX_MESSAGE_BYTES}-byte limit")
    data = read_exact(fd, size, deadline)
    items = data.count(b",") + data.count(b"[") + data.count(b"{")
    if items > MAX_ITEMS:
        raise WireError(f"a message of {items} values is over the {MAX_ITEMS}-value limit")
    try:
        message = json.loads(data)
    except (ValueError, RecursionError) as err:
        raise WireError(f"not a JSON message: {err}") from err
    if not isinstance(message, dict):
        raise WireError("a message must be a JSON object")
    return message


# ------------------------------------------------------------------------------- encoding
_CACHE_LIMIT = 1 << 20  # arrays up to 1 MB of text are remembered, both ways
_recent_encodings: dict[tuple, str] = {}


def _array_bytes(array: np.ndarray) -> str:
    """The array as base64 ``.npy`` text. The same small array is often sent thousands of
    times (one call per sample): writing ``.npy``'s header costs more than looking up its
    contents, so recent encodings are remembered by dtype, shape and bytes."""
    contiguous = array if array.flags.c_contiguous else array.copy(order="C")  # keeps 0-d
    key = (contiguous.dtype.str, contiguous.shape, contiguous.tobytes())
    small = contiguous.nbytes <= _CACHE_LIMIT // 4
    if small and key in _recent_encodings:
        return _recent_encodings[key]
    buffer = io.BytesIO()
    np.save(buffer, contiguous, allow_pickle=False)
    text = base64.b64encode(buffer.getvalue()).decode("ascii")
    if small:
        _remember(_recent_encodings, key, text)
    return text


def _remember(cache: dict, key: Any, value: Any) -> None:
    if len(cache) >= 32:
        cache.pop(next(iter(cache)))
    cache[key] = value


def encode(value: Any, ref: Callable[[Any], dict] | None = None, depth: int = 0) -> Any:
    """A JSON-able form of ``value``; objects that are not data go through ``ref`` (a handle)."""
    if depth > 50:
        raise TypeError("the value is nested too deeply to send")
    if value is None or isinstance(value, (bool, str)):
        return value
    if type(value) in (int, float):
        return value
    if isinstance(value, np.ndarray) and value.dtype != object:
        return {"$nd": _array_bytes(value)}
    if isinstance(value, np.generic) and not isinstance(value, np.object_):
        return {"$np": _array_bytes(np.asarray(value))}
    if isinstance(value, np.random.Generator):
        return {"$rng": value.bit_generator.state}
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.Generator) and value.device.type == "cpu":
        return {"$torchrng": _array_bytes(value.get_state().numpy())}
    if torch is not None and isinstance(value, torch.Tensor):
        return {
            "$torch": _array_bytes(value.detach().cpu().numpy()),
            "grad": bool(value.requires_grad),
        }
    if isinstance(value, list):  # a list subclass arrives as a list
        return [encode(v, ref, depth + 1) for v in list(value)]
    if isinstance(value, tuple):  # named tuples arrive as plain tuples
        return {"$tuple": [encode(v, ref, depth + 1) for v in value]}
    if isinstance(value, (set, frozenset)):
        return {"$set": [encode(v, ref, depth + 1) for v in value]}
    if isinstance(value, dict):  # a Counter, defaultdict or state_dict arrives as a dict
        return {
            "$dict": [
                [encode(k, ref, depth + 1), encode(v, ref, depth + 1)] for k, v in dict.items(value)
            ]
        }
    return _as_ref(value, ref)


def _as_ref(value: Any, ref: Callable[[Any], dict] | None) -> dict:
    if ref is None:
        raise TypeError(f"a {type(value).__name__} cannot be sent to the student's code")
    return ref(value)


# ------------------------------------------------------------------------------- decoding
_recent_arrays: dict[str, np.ndarray] = {}


def _load_array(text: Any) -> np.ndarray:
    """A fresh array from its ``.npy`` text. The same argument often arrives thousands of times
    (one call per sample): a small cache skips re-parsing it, and each caller gets a copy."""
    if not isinstance(text, str):
        raise WireError("an array must be base64 text")
    known = _recent_arrays.get(text)
    if known is not None:
        return known.copy()
    try:
        array = np.load(io.BytesIO(base64.b64decode(text, validate=True)), allow_pickle=False)
    except ValueError as err:
        raise WireError(f"not a plain .npy array: {err}") from err
    if len(text) <= _CACHE_LIMIT:
        _remember(_recent_arrays, text, array.copy())
    return array


def _generator(state: Any) -> np.random.Generator:
    if not isinstance(state, dict) or state.get("bit_generator") not in _BIT_GENERATORS:
        raise WireError("not the state of a NumPy bit generator")
    bit_generator = getattr(np.random, state["bit_generator"])(0)  # a seed: no OS entropy
    try:
        bit_generator.state = state
    except (TypeError, ValueError, KeyError, OverflowError) as err:
        raise WireError(f"bad random generator state: {err}") from err
    return np.random.Generator(bit_generator)


def _torch_generator(text: Any):
    import torch

    state = _load_array(text)
    if state.dtype != np.uint8 or state.ndim != 1:
        raise WireError("not the state of a torch random generator")
    generator = torch.Generator()
    try:
        generator.set_state(torch.from_numpy(state.copy()))
    except (RuntimeError, TypeError, ValueError) as err:
        raise WireError(f"bad torch generator state: {err}") from err
    return generator


def decode(value: Any, resolve: Callable[[dict], Any] | None = None, depth: int = 0) -> Any:
    """The value ``encode`` wrote; handles (``{"$ref": ...}``) are given to ``resolve``."""
    if depth > 60:
        raise WireError("the value is nested too deeply")
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, list):
        return [decode(v, resolve, depth + 1) for v in value]
    if not isinstance(value, dict) or len(value) not in (1, 2):
        raise WireError("unknown value on the wire")
    if "$nd" in value:
        return _load_array(value["$nd"])
    if "$np" in value:
        return _load_array(value["$np"])[()]
    if "$rng" in value:
        return _generator(value["$rng"])
    if "$torchrng" in value:
        return _torch_generator(value["$torchrng"])
    if "$torch" in value:
        import torch

        return torch.from_numpy(_load_array(value["$torch"]).copy()).requires_grad_(
            bool(value.get("grad"))
        )
    if "$tuple" in value:
        return tuple(decode(value["$tuple"], resolve, depth + 1))
    if "$set" in value:
        return set(decode(value["$set"], resolve, depth + 1))
    if "$dict" in value:
        pairs = value["$dict"]
        if not isinstance(pairs, list) or not all(
            isinstance(p, list) and len(p) == 2 for p in pairs
        ):
            raise WireError("a dict must be a list of pairs")
        try:
            return {decode(k, resolve, depth + 1): decode(v, resolve, depth + 1) for k, v in pairs}
        except TypeError as err:  # an unhashable key
            raise WireError(f"bad dict key: {err}") from err
    if resolve is not None and ("$ref" in value or "$name" in value or "$obj" in value):
        return resolve(value)
    raise WireError(f"unknown value on the wire: {sorted(value)[:3]}")
