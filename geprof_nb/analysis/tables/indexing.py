"""Small numpy helpers for joining raw records by connection id."""

from __future__ import annotations

import numpy as np


def scatter(size: int, index: np.ndarray, values, fill, dtype) -> np.ndarray:
    """A dense array of ``size`` filled with ``fill``, with ``values`` placed at ``index``."""
    out = np.full(size, fill, dtype=dtype)
    out[index] = values
    return out
