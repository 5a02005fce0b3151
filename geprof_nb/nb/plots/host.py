"""Host scopes (``host_events``, ``Source.api_calls()``) on their own timeline, one lane per overlap."""

from __future__ import annotations

import textwrap

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from .colors import color_of
from .figure import empty_figure, factorize, floats, literal
from .spans import span_chart

STACKED_SCOPES_NOTE = ("Scopes narrower than a pixel column are merged per column; where scopes share a column, "
                       "its height is split among them by their time.")
NO_HOST_EVENTS_MESSAGE = ("no GE host events: profile a dynamic-shape graph (e.g. ge.models.mlp(dynamic=True)) "
                          "with --ge-api l1")


def sub_rows(group: np.ndarray, lo: np.ndarray, hi: np.ndarray, tolerance: float = 0.0) -> np.ndarray:
    """A lane per interval so intervals of one group in one lane never overlap (greedy, by start,
    longest first, so an enclosing scope takes a lane above what it encloses).  ``tolerance``
    (x units) lets an interval start that much before the previous one in its lane ends."""
    order = np.lexsort((-hi, lo, group))
    lane = np.zeros(len(lo), np.int64)
    ends: list[float] = []
    current = None
    for i in order.tolist():
        if group[i] != current:
            current, ends = group[i], []
        start = lo[i] + tolerance
        for k, e in enumerate(ends):
            if e <= start:
                break
        else:
            k = len(ends)
            ends.append(0.0)
        ends[k] = hi[i]
        lane[i] = k
    return lane


def host_scopes(host_events: pd.DataFrame, api_calls: pd.DataFrame | None = None, by: str = "event",
                title: str | None = None, width_px: int = 1100) -> Figure:
    """Draw host work on its own timeline: GE host events and, optionally, host API calls.

    ``host_events`` is ``Profile.host_events`` (Thread ID, Element, Event, Start(us), End(us)),
    ``api_calls`` the host API records of ``Profile.source.api_calls()`` (level, api, thread,
    begin, end in ns; ``api_statistic`` has no times and is refused).

    * ``by="event"``: one row per API (``RunGraph (acl)``, ``InferShape (node)``, ...; outer levels
      first, a line below them), then one row per host event type (CopyH2D, InferShape, Tiling,
      AllocMemory, rtKernelLaunch, ...), each in order of first occurrence.  A row has one colour.
    * ``by="thread"``: per thread one row per API level (acl, model, node, ...) and one for the GE
      host events, a row more where scopes of one row overlap (:func:`sub_rows`); coloured by scope
      name, with a legend.

    x in ms since the first scope; scopes of zero duration are not drawn.  Drawn like
    :func:`task_gantt` (one path per colour, merged per pixel column).  Without host events the
    figure says how to get them (``--ge-api l1`` on a dynamic-shape graph).
    """
    if by not in ("event", "thread"):
        raise ValueError(f"by={by!r}: use 'event' or 'thread'")
    if api_calls is not None and not {"begin", "end", "api"} <= set(api_calls.columns):
        raise ValueError("api_calls needs the per-call records with begin/end times (Profile.source.api_calls()); "
                         "api_statistic only has totals")
    he = host_events if host_events is not None else pd.DataFrame()
    ac = api_calls if api_calls is not None else pd.DataFrame()
    if he.empty and ac.empty:
        return empty_figure(NO_HOST_EVENTS_MESSAGE)

    # Times relative to the first scope, in ms: API records are int ns, host events float µs.
    he_start = floats(he["Start(us)"]) if len(he) else np.zeros(0)
    he_end = floats(he["End(us)"]) if len(he) else np.zeros(0)
    ac_begin = ac["begin"].to_numpy(np.int64) if len(ac) else np.zeros(0, np.int64)
    ac_end = ac["end"].to_numpy(np.int64) if len(ac) else np.zeros(0, np.int64)
    origin_ns = int(min(np.nanmin(he_start) * 1000 if len(he) else np.inf, ac_begin.min() if len(ac) else np.inf))
    lo = np.r_[(ac_begin - origin_ns) / 1e6, (he_start - origin_ns / 1000.0) / 1000.0]
    hi = np.r_[(ac_end - origin_ns) / 1e6, (he_end - origin_ns / 1000.0) / 1000.0]
    levels = ac["level"].astype(str).to_numpy(object) if len(ac) else np.zeros(0, object)
    names = np.r_[ac["api"].astype(str).to_numpy(object) if len(ac) else np.zeros(0, object),
                  he["Event"].astype(str).to_numpy(object) if len(he) else np.zeros(0, object)]
    threads = np.r_[ac["thread"].to_numpy(np.int64) if len(ac) else np.zeros(0, np.int64),
                    he["Thread ID"].to_numpy(np.int64) if len(he) else np.zeros(0, np.int64)]
    is_api = np.r_[np.ones(len(ac), bool), np.zeros(len(he), bool)]
    n_api, n_events = len(ac), len(he)
    drawn = np.isfinite(lo) & (hi > lo)
    lo, hi, names, threads, is_api = lo[drawn], hi[drawn], names[drawn], threads[drawn], is_api[drawn]
    levels = levels[drawn[: len(levels)]]
    if len(lo) == 0:
        return empty_figure("every host scope has zero duration: nothing to draw")
    kind, kinds = factorize(pd.Series(names, dtype=object))

    if by == "event":
        level_rank = {"acl": 0, "model": 1, "node": 2, "runtime": 3}
        keys = np.r_[[f"{a} ({lv})" for a, lv in zip(names[is_api], levels)], names[~is_api]].astype(object)
        rank = np.r_[[level_rank.get(lv, 4) for lv in levels], np.full((~is_api).sum(), 5)]
        order = np.lexsort((np.r_[lo[is_api], lo[~is_api]], rank))
        labels = list(dict.fromkeys(keys[order].tolist()))
        index = {k: i for i, k in enumerate(labels)}
        row = np.empty(len(lo), np.int64)
        row[np.flatnonzero(is_api)] = [index[k] for k in keys[: is_api.sum()]]
        row[np.flatnonzero(~is_api)] = [index[k] for k in keys[is_api.sum():]]
        n_api_rows = len({k for k in keys[: is_api.sum()]})
    else:
        # per thread: the API levels (outer first), then the GE host events; a lane more where scopes overlap
        level_rank = {"acl": 0, "model": 1, "node": 2, "runtime": 3}
        level_names = ["acl", "model", "node", "runtime", "api", "host events"]
        source = np.r_[[level_rank.get(lv, 4) for lv in levels], np.full((~is_api).sum(), 5)].astype(np.int64)
        group = pd.factorize(pd.Series(list(zip(threads.tolist(), source.tolist()))))[0]
        lane = sub_rows(group, lo, hi, tolerance=0.0)
        keys = np.stack([threads, source, lane], axis=1)
        rows_used, row = np.unique(keys, axis=0, return_inverse=True)
        row = row.ravel()
        labels = [f"thread {t} · {level_names[src]}" + (f" ({ln + 1})" if ln else "") for t, src, ln in rows_used]
        n_api_rows = 0

    n_rows = len(labels)
    fig, ax, x1 = span_chart(row, lo, hi, kind, kinds, labels, width_px, 0.34, 9,
                              "time since the first host scope (ms)", STACKED_SCOPES_NOTE)
    if 0 < n_api_rows < n_rows:
        ax.axhline(n_api_rows - 0.5, color="0.6", linewidth=0.8)
    if by == "thread":
        fig.legend([Patch(facecolor=color_of(k)) for k in kinds], kinds, loc="outside right upper", frameon=False,
                   fontsize=9, title="scope", title_fontsize=9)
    heading = title or "Host scopes"
    counts = [f"{n_events:,} host events"] + ([f"{n_api:,} API calls"] if n_api else [])
    # without host events the title says so on a second line, where the layout leaves it room (at the
    # figure's foot the note covered the x label)
    note = "\n" + textwrap.fill(NO_HOST_EVENTS_MESSAGE, max(40, width_px // 8)) if he.empty else ""
    ax.set_title(f"{heading}  ({', '.join(counts)} over {x1:,.3f} ms){note}", loc="left")
    return literal(fig)
