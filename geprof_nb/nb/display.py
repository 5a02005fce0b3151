"""Static rich output for a Profile: HTML tables (op names escaped) with text
twins, and the step timeline as PNG.  Works wherever a notebook is rendered
(JupyterLab, nbconvert, GitHub), with no widget front end needed.
"""

from __future__ import annotations

import html

import pandas as pd
from IPython.display import display

from ..analysis import Profile
from . import plots

TOP_OPS = 20


def _float(x: float) -> str:
    return f"{x:.3f}"


def table_html(df: pd.DataFrame, title: str) -> str:
    """An escaped HTML table under a heading (pandas escapes every cell)."""
    body = df.to_html(escape=True, index=False, na_rep="N/A", float_format=_float, border=0,
                      classes="dataframe geprof-table")
    return f'<div class="geprof-section"><h4>{html.escape(title)}</h4>{body}</div>'


def table_text(df: pd.DataFrame, title: str) -> str:
    return f"{title}\n{df.to_string(index=False, na_rep='N/A', float_format=_float)}"


def top_ops(profile: Profile, n: int = TOP_OPS) -> tuple[pd.DataFrame, str]:
    """The ``n`` longest op tasks of the last iteration, and a title saying so."""
    ops = profile.ops()
    its = profile.iterations
    where = f"iteration {int(its.max())}" if len(its) else "the run"
    top = ops.sort_values("Task Duration(us)", ascending=False, kind="stable").head(n)
    return top, f"op_summary: top {len(top)} of {len(ops)} op tasks of {where} by Task Duration(us)"


def headline(profile: Profile) -> str:
    """One line a person reads first: what ran, how long a step took, where time went."""
    st = profile.step_trace
    parts = [f"{profile.name}"]
    if not profile.complete:
        parts.append("INCOMPLETE run (not finalised): tables hold what was flushed")
    if len(st):
        it = st["Iteration Time(us)"].dropna()
        parts.append(f"{len(st)} iterations, mean iteration time {it.mean() / 1000:.3f} ms" if len(it) else
                     f"{len(st)} iterations")
    stat = profile.op_statistic
    if len(stat):
        top = stat.iloc[0]
        parts.append(f"top op type {top['OP Type']} ({top['Ratio(%)']:.1f}% of op time)")
    return " | ".join(parts)


def summary_bundle(profile: Profile) -> dict[str, str]:
    """Headline, run location, notes (FP/BP points, dropped data, ...) and the top-ops table."""
    top, title = top_ops(profile)
    head = headline(profile)
    where = f"run directory: {profile.path}"
    notes = profile.notes
    notes_html = ("<ul class=\"geprof-notes\">" + "".join(f"<li>{html.escape(n)}</li>" for n in notes) + "</ul>"
                  if notes else "")
    html_out = (f'<div class="geprof-report"><p><b>geprof</b> {html.escape(head)}<br>'
                f"<small>{html.escape(where)}</small></p>{notes_html}{table_html(top, title)}</div>")
    notes_text = "".join(f"- {n}\n" for n in notes)
    text = f"geprof {head}\n{where}\n{notes_text}\n{table_text(top, title)}"
    return {"text/html": html_out, "text/plain": text}


def table_bundle(df: pd.DataFrame, title: str) -> dict[str, str]:
    return {"text/html": table_html(df, title), "text/plain": table_text(df, title)}


def timeline_bundle(profile: Profile) -> dict[str, object]:
    fig = plots.step_timeline(profile.step_trace)
    return {"image/png": plots.figure_png(fig), "text/plain": f"<FP/BP step timeline of {profile.name}>"}


def report_bundles(profile: Profile) -> list[dict[str, object]]:
    """What ``%%geprof`` shows, in order: summary + top ops, op statistics, step trace, step timeline."""
    bundles: list[dict[str, object]] = [summary_bundle(profile)]
    if len(profile.op_statistic):
        bundles.append(table_bundle(profile.op_statistic, "op_statistic: time per OP Type and Core Type"))
    st = profile.step_trace
    if len(st):
        bundles.append(table_bundle(st, f"step_trace: {len(st)} iterations (times in us)"))
        bundles.append(timeline_bundle(profile))
    return bundles


def show_profile(profile: Profile) -> None:
    """Show a Profile's report in the notebook (what ``%%geprof`` and ``%geprof show`` display)."""
    for bundle in report_bundles(profile):
        display(bundle, raw=True)


def profile_html(profile: Profile) -> str:
    """``display(profile)`` in HTML: the summary bundle."""
    return str(summary_bundle(profile)["text/html"])
