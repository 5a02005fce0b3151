"""Escaped HTML pieces with text twins: the tables, lists, messages and embedded PNGs the explorers
and their static reports are made of.

Every string that comes from the run (op names, notes, findings, run names) goes through
:func:`html.escape` or pandas ``to_html(escape=True)`` before it is put into HTML.
"""

from __future__ import annotations

import base64
import html
from typing import Any

import numpy as np
import pandas as pd

#: Rows a table shows in the static report (and by default in the explorer): the count is stated.
TOP_OPS = 20


def _float(x: float) -> str:
    return f"{x:.3f}"


def table_html(df: pd.DataFrame, title: str | None = None, classes: str = "") -> str:
    """An escaped HTML table (pandas escapes every cell and header), under a heading if given,
    in a box that scrolls sideways when the table is wider than the output area."""
    body = _na_as_text(df).to_html(escape=True, index=False, na_rep="N/A", float_format=_float, border=0,
                      classes=f"geprof-table {classes}".strip())  # pandas adds "dataframe"
    head = f"<h4>{html.escape(title)}</h4>" if title else ""
    return f'<div class="geprof-section">{head}<div style="overflow-x:auto">{body}</div></div>'


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
    """Findings as an escaped HTML table, each row coloured by its priority."""
    cols = list(findings.columns)
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in cols)
    rows = []
    for rec in findings.itertuples(index=False):
        prio = str(rec[0]) if cols and cols[0] == "Priority" else ""
        color = PRIORITY_COLORS.get(prio, "")
        cells = "".join(f"<td>{html.escape(_cell(v))}</td>" for v in rec)
        rows.append(f'<tr class="geprof-priority-{html.escape(prio.lower())}" style="background:{color}">{cells}</tr>')
    return (f'<div style="overflow-x:auto"><table class="dataframe geprof-table geprof-advice" border="0">'
            f'<thead><tr style="text-align:left">{head}</tr></thead><tbody>{"".join(rows)}</tbody></table></div>')


def _cell(v: Any) -> str:
    if isinstance(v, float):
        return "N/A" if np.isnan(v) else f"{v:.3f}"
    return str(v)
