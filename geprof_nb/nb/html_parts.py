"""Escaped HTML pieces with text twins: the tables, lists, messages and embedded PNGs the explorers
and their static reports are made of.

Every string that comes from the run (op names, notes, findings, run names) goes through
:func:`html.escape` before it is put into HTML.  Tables show numbers as a person reads them:
right-aligned, with thousands separators (:func:`table_html`).
"""

from __future__ import annotations

import base64
import html
import re
from typing import Collection

import numpy as np
import pandas as pd

#: Rows a table shows in the static report (and by default in the explorer): the count is stated.
TOP_OPS = 20


def _float(x: float) -> str:
    return f"{x:.3f}"


#: Columns whose numbers are ids or labels (Device_id, Model ID, Task ID, Iteration ID, Step, Rank): right-aligned
#: as numbers, without thousands separators.
_ID_COLUMN = re.compile(r"(?i)(^|[ _])id$|^(step|rank|model [ab])$")
#: Right-aligned cells (``align`` rather than a style: GitHub's sanitiser keeps it, and it is short).
_RIGHT = ' align="right"'
#: The header of a text column, aligned with its cells (browsers centre headers, JupyterLab's widgets right-align
#: them; the style for those, the attribute where styles are stripped, as on GitHub).
_LEFT = ' align="left" style="text-align:left"'


def _is_number_column(values: pd.Series) -> bool:
    return pd.api.types.is_numeric_dtype(values) and not pd.api.types.is_bool_dtype(values)


def _number_texts(values: pd.Series, separators: bool) -> list[str]:
    """A numeric column as cell texts: floats with 3 decimals, integers whole, thousands separated
    (``separators``), missing values as ``N/A``."""
    sep = "," if separators else ""
    missing = values.isna().to_numpy()
    if pd.api.types.is_integer_dtype(values):
        ints = values.to_numpy(dtype=np.int64, na_value=0)
        return ["N/A" if m else format(int(v), sep) for v, m in zip(ints.tolist(), missing.tolist())]
    floats = values.to_numpy(dtype=np.float64, na_value=np.nan)
    return ["N/A" if m else format(v, f"{sep}.3f") for v, m in zip(floats.tolist(), missing.tolist())]


def _column_cells(df: pd.DataFrame, i: int, right: Collection[str] = ()) -> tuple[list[str], bool]:
    """The escaped cells of column ``i`` (by position: step_trace repeats its Reduce names) and whether it
    holds numbers (then right-aligned; so is a text column named in ``right``, numbers written as text)."""
    values, name = df.iloc[:, i], str(df.columns[i])
    if _is_number_column(values):
        return _number_texts(values, separators=not _ID_COLUMN.search(name)), True
    texts = values.astype(object).where(values.notna(), "N/A").tolist()
    return [html.escape(str(v)) for v in texts], name in right


def table_html(df: pd.DataFrame, title: str | None = None, classes: str = "", right: Collection[str] = ()) -> str:
    """An escaped HTML table (every header and cell escaped), numbers right-aligned with thousands
    separators (ids without), under a heading if given, in a box that scrolls sideways when the table is
    wider than the output area.  ``right``: text columns that hold numbers already written as text
    (right-aligned as the numbers are)."""
    columns = [_column_cells(df, i, right) for i in range(df.shape[1])]
    head = "".join(f"<th{_RIGHT if number else _LEFT}>{html.escape(str(name))}</th>"
                   for name, (_, number) in zip(df.columns, columns))
    aligns = [_RIGHT if number else "" for _, number in columns]
    rows = "".join("<tr>" + "".join(f"<td{align}>{cell}</td>" for align, cell in zip(aligns, cells)) + "</tr>"
                   for cells in zip(*(c for c, _ in columns))) if columns else "<tr></tr>" * len(df)
    body = (f'<table border="0" class="dataframe {f"geprof-table {classes}".strip()}"><thead><tr>{head}</tr>'
            f"</thead><tbody>{rows}</tbody></table>")
    heading = f"<h4>{html.escape(title)}</h4>" if title else ""
    return f'<div class="geprof-section">{heading}<div style="overflow-x:auto">{body}</div></div>'


def _na_as_text(df: pd.DataFrame) -> pd.DataFrame:
    """Missing values of nullable integer columns as ``N/A`` (``na_rep`` covers float NaN only).
    By position: step_trace repeats its Reduce column names."""
    ints = [i for i, t in enumerate(df.dtypes) if isinstance(t, pd.api.extensions.ExtensionDtype)
            and pd.api.types.is_integer_dtype(t) and df.iloc[:, i].isna().any()]
    if not ints:
        return df
    out = df.copy()
    names = out.columns
    out.columns = range(len(names))
    for i in ints:
        out[i] = out[i].astype(object).where(out[i].notna(), "N/A")
    out.columns = names
    return out


def table_text(df: pd.DataFrame, title: str | None = None) -> str:
    body = _na_as_text(df).to_string(index=False, na_rep="N/A", float_format=_float)
    return f"{title}\n{body}" if title else body


def message_html(text: str) -> str:
    """A note in place of missing content (escaped)."""
    return f'<p class="geprof-message"><i>{html.escape(text)}</i></p>'


def png_img_html(png: bytes, alt: str) -> str:
    """A PNG embedded in HTML, so the report needs no files or kernel."""
    data = base64.b64encode(png).decode("ascii")
    return f'<img src="data:image/png;base64,{data}" alt="{html.escape(alt)}" style="max-width:100%">'


def list_html(items: list[str], classes: str = "") -> str:
    return f'<ul class="{classes}">' + "".join(f"<li>{html.escape(i)}</li>" for i in items) + "</ul>"


def heading(text: str) -> str:
    return f"<h4>{html.escape(text)}</h4>"


def bounded(df: pd.DataFrame, what: str, n: int) -> tuple[pd.DataFrame, str]:
    """The first n rows and a title that states the count."""
    return (df, f"{what}: {len(df)} rows") if len(df) <= n else (df.head(n), f"{what}: first {n} of {len(df)} rows")


#: Row colours of the findings tables, by priority.
PRIORITY_COLORS = {"High": "#f8d7da", "Medium": "#fff3cd", "Low": "#d1ecf1"}


def advice_html(findings: pd.DataFrame) -> str:
    """Findings as an escaped HTML table, each row coloured by its priority, numbers as :func:`table_html`'s."""
    cols = list(findings.columns)
    columns = [_column_cells(findings, i) for i in range(len(cols))]
    head = "".join(f"<th{_RIGHT if number else _LEFT}>{html.escape(str(c))}</th>"
                   for c, (_, number) in zip(cols, columns))
    aligns = [_RIGHT if number else "" for _, number in columns]
    prios = findings.iloc[:, 0].astype(str).tolist() if cols and cols[0] == "Priority" else [""] * len(findings)
    rows = []
    for prio, cells in zip(prios, zip(*(c for c, _ in columns))):
        color = PRIORITY_COLORS.get(prio, "")
        tds = "".join(f"<td{align}>{cell}</td>" for align, cell in zip(aligns, cells))
        rows.append(f'<tr class="geprof-priority-{html.escape(prio.lower())}" style="background:{color}">{tds}</tr>')
    return (f'<div style="overflow-x:auto"><table class="dataframe geprof-table geprof-advice" border="0">'
            f'<thead><tr style="text-align:left">{head}</tr></thead><tbody>{"".join(rows)}</tbody></table></div>')
