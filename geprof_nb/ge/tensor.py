"""Tensor descriptions: shapes, dtypes and formats as GE knows them, and the checks every API that takes
them shares (``ge.Graph`` as ops are added, the op catalogue's shape rules, ACL's inputs).

Its own module because the graph (:mod:`.graph`) and the op catalogue (:mod:`.ops`) both build on it.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field, replace
from typing import Any

from ..prof.rawdata import DTYPES, Format

DTYPE_ALIASES = {"fp16": "float16", "half": "float16", "float": "float32", "fp32": "float32",
                 "bf16": "bfloat16", "double": "float64"}
FORMATS: dict[str, Format] = {f.name[len("FORMAT_"):]: f for f in Format}

class GraphBuildError(ValueError):
    """An op could not be added: wrong inputs, bad attributes or shapes that do not fit."""


def canonical_dtype(dtype: str, where: str = "dtype") -> str:
    name = DTYPE_ALIASES.get(str(dtype).lower(), str(dtype).lower())
    if name not in DTYPES:
        raise GraphBuildError(f"{where}: unknown dtype {dtype!r}; accepted: {', '.join(DTYPES)}")
    return name


def canonical_format(fmt: str, where: str = "format") -> str:
    name = str(fmt).upper()
    if name not in FORMATS:
        raise GraphBuildError(f"{where}: unknown format {fmt!r}; accepted: {', '.join(FORMATS)}")
    return name


#: An unknown dimension (a dynamic-shape graph input), as GE writes it.
UNKNOWN_DIM = -1
#: Shape inference of ops with unknown input dims runs twice with these in
#: their place; output dims that come out equal are known, the others unknown.
PROBE_DIMS = (61, 67)


#: GE sizes tensors in int64 bytes; a larger tensor cannot be described.
MAX_TENSOR_BYTES = 2**63 - 1


def _dim(d: Any) -> int | None:
    """``d`` as an int if it is one (Python or numpy integer, not a bool), else ``None``."""
    if isinstance(d, bool):  # numpy bools already refuse operator.index
        return None
    try:
        return operator.index(d)
    except TypeError:
        return None


def checked_shape(shape: Any, where: str, allow_unknown: bool = False) -> tuple[int, ...]:
    accepted = "ints >= 1, or -1 for an unknown (dynamic) one" if allow_unknown else "ints >= 1"
    scalar = _dim(shape)
    if scalar is not None:
        shape = (scalar,)
    try:
        given = tuple(shape)
    except TypeError:
        raise GraphBuildError(f"{where}: shape must be a sequence of ints, got {shape!r}") from None
    if isinstance(shape, (str, bytes)):
        raise GraphBuildError(f"{where}: shape must be a sequence of ints, got {shape!r}")
    dims = tuple(_dim(d) for d in given)
    for i, d in enumerate(dims):
        if d is None:
            raise GraphBuildError(f"{where}: shape {list(given)!r}: dimension {i} ({given[i]!r}) is not an int; "
                                  f"accepted: {accepted}")
    if any(d < 1 and not (allow_unknown and d == UNKNOWN_DIM) for d in dims):
        raise GraphBuildError(f"{where}: shape {list(dims)} is not valid; accepted: "
                              + accepted.replace("ints", "dimensions"))
    return dims


@dataclass(frozen=True)
class TensorDesc:
    """Shape, dtype and format of one tensor (``ge::TensorDesc``)."""

    shape: tuple[int, ...]
    dtype: str = "float16"
    format: str = "ND"
    #: Shape before a format change (TransData to NC1HWC0 needs it to come back).
    origin_shape: tuple[int, ...] | None = None
    #: For a shape with unknown dims: the concrete shapes it had when the graph's unknown input
    #: dims were taken as each of :data:`PROBE_DIMS` (so a flattened [-1, h] of a [-1, s, h] still
    #: has s-multiple rows when the next op is inferred).
    probe_shapes: tuple[tuple[int, ...], ...] | None = field(default=None, compare=False, repr=False)

    @property
    def is_dynamic(self) -> bool:
        return UNKNOWN_DIM in self.shape

    @property
    def numel(self) -> int:
        """Element count (negative if a dimension is unknown)."""
        n = 1
        for d in self.shape:
            n *= d
        return n

    @property
    def itemsize(self) -> int:
        return DTYPES[self.dtype][1]

    @property
    def nbytes(self) -> int:
        return self.numel * self.itemsize

    @property
    def rank(self) -> int:
        return len(self.shape)

    def with_(self, **changes: Any) -> "TensorDesc":
        return replace(self, **changes)

    def __str__(self) -> str:
        return f"{self.dtype}[{','.join(map(str, self.shape))}]:{self.format}"


def tensor_mismatch(x: Any, want: TensorDesc) -> str:
    """Why the array ``x`` cannot stand for a tensor described by ``want`` ("" if it can).

    One check for every API that takes arrays for a graph's tensors (``Session.run_graph``,
    ``aclmdlExecute``), so they accept the same inputs: the shape must match (a -1 dim takes
    any size >= 1) and a dtype, where ``x`` has one GE knows, must be ``want``'s.
    """
    given = getattr(x, "shape", ())
    try:
        dims = [_dim(d) for d in given]
    except TypeError:
        dims = [None]
    if None in dims:
        return f"has shape {given!r}; accepted: an array whose shape is a sequence of ints"
    fits = len(dims) == want.rank and all(w == g or (w == UNKNOWN_DIM and g >= 1) for w, g in zip(want.shape, dims))
    if not fits:
        return f"has shape {dims}, expected {list(want.shape)}" + (" (-1: any size)" if want.is_dynamic else "")
    dtype = str(getattr(x, "dtype", "")).lower()
    dtype = DTYPE_ALIASES.get(dtype, dtype)
    if dtype in DTYPES and dtype != want.dtype:
        return f"has dtype {dtype}, expected {want.dtype}"
    return ""
