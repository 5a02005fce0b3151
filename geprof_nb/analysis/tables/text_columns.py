"""Text columns handled once per distinct value.

The tables' text columns (op names, types, transports, ...) hold a few hundred distinct values over
up to millions of rows.  Making or converting a Python string per row takes seconds there; these
helpers work on the distinct values and each row's code instead, with the same result.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

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


def distinct_texts(col: pd.Series) -> tuple[pd.Series, np.ndarray]:
    """``col.astype(str)`` factored into its distinct texts and each row's position among them, so that
    a test or lookup runs once per distinct value.  A categorical's missing value is the last text (its
    code -1 picks it), missing as ``astype(str)`` leaves it."""
    if isinstance(col.dtype, pd.CategoricalDtype):
        every_value = np.r_[np.arange(len(col.cat.categories)), -1]
        texts = pd.Series(pd.Categorical.from_codes(every_value, dtype=col.dtype)).astype(str)
        return texts, col.cat.codes.to_numpy(np.intp)
    return col.astype(str).reset_index(drop=True), np.arange(len(col))


def text_codes(col: pd.Series) -> tuple[pd.Index, np.ndarray]:
    """The distinct texts of ``col.astype(str)`` and each row's code among them (:func:`distinct_texts`,
    then equal texts made one: two categories may print alike); -1 for a missing value.  Grouping by the
    codes groups as grouping by the texts does."""
    texts, position = distinct_texts(col)
    codes, uniques = pd.factorize(texts)
    return uniques, codes[position]


def text_test(col: pd.Series, test: Callable[[pd.Series], pd.Series]) -> np.ndarray:
    """``test(col.astype(str))`` as a boolean array, ``test`` (an element-wise comparison) run once per
    distinct value (:func:`distinct_texts`)."""
    texts, position = distinct_texts(col)
    return test(texts).to_numpy(bool)[position]


def text_values(col: pd.Series, rows: np.ndarray) -> pd.Series:
    """``col.astype(str)`` of some rows (positions or a boolean mask), converted once per distinct value
    (:func:`distinct_texts`)."""
    texts, position = distinct_texts(col)
    return pd.Series(texts.array.take(position[rows]), index=col.index[rows], name=col.name)
