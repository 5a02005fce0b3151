"""Rich output for a Profile: escaped HTML pieces with text twins, and the one display call.

``show_profile`` (what ``%%geprof`` and ``%geprof show`` call) and ``display(profile)`` both
show one mimebundle built by :mod:`.explorer`: the tabbed widget explorer for front ends that
run widgets (JupyterLab), and a static HTML report, the step timeline PNG and a text summary
for those that do not (nbconvert, GitHub, a terminal IPython).

Every string that comes from the run (op names, notes, findings, run names) goes through
:func:`html.escape` or pandas ``to_html(escape=True)`` before it is put into HTML.
"""

from __future__ import annotations

import base64
import html

import pandas as pd
from IPython.display import display

from ..analysis import ClusterProfile, Profile

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


def profile_mimebundle(profile: Profile | ClusterProfile) -> dict[str, object]:
    """The raw bundle of a Profile: widget view, static HTML report, step timeline PNG, text summary
    (for a ClusterProfile: the cluster explorer's, :mod:`.cluster_explorer`)."""
    if isinstance(profile, ClusterProfile):
        from .cluster_explorer import ClusterExplorer

        return ClusterExplorer(profile).mimebundle()
    from .explorer import Explorer  # ipywidgets is imported when something is first shown

    return Explorer(profile).mimebundle()


def show_profile(profile: Profile | ClusterProfile) -> None:
    """Show a Profile's explorer (with its static fallback) in one display call:
    what ``%%geprof``, ``%geprof show`` and ``display(profile)`` show."""
    display(profile_mimebundle(profile), raw=True)
