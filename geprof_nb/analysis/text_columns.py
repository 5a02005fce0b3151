"""Text columns handled once per distinct value.

The tables' text columns (op names, types, transports, ...) hold a few hundred distinct values over
up to millions of rows.  Making or converting a Python string per row takes seconds there; these
helpers work on the distinct values and each row's code instead, with the same result.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

#: A column's values as :func:`text_array` gives them.
TextValues = pd.api.extensions.ExtensionArray | np.ndarray


def text_array(texts: Sequence[str] | np.ndarray | pd.Index, codes: np.ndarray) -> TextValues:
    """The column whose row ``i`` is ``texts[codes[i]]``, stored as pandas stores a column built from
    those Python strings (``str``; ``object`` when there are no rows), by one take from the distinct
    texts instead of a string per row."""
    if len(codes) == 0:
        return np.zeros(0, dtype=object)
    return pd.array(np.asarray(texts, dtype=object), dtype="str").take(np.asarray(codes, np.intp))
