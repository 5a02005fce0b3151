"""``Timeline``: the interactive timeline widget (anywidget: an ES module shipped in the package, no
build step, no CDN), with a static fallback in the same display bundle.

The browser draws on a canvas and asks the kernel for what a view needs (custom messages): ``view``
(lanes, window, columns, search text: :meth:`.TimelineData.view`'s binary level of detail), ``op``
(an op's instances and statistics), ``detail`` (a span's row) and ``search``.  The answer to a
request carries its ``id``; a failing request answers ``error`` with the reason, shown in the widget.

Front ends without widgets (nbconvert, GitHub, a terminal) show the bundle's static parts: a text
summary, the task Gantt PNG of the last step (:func:`..plots.task_gantt`; of the slowest rank for a
cluster: drawing a million tasks would cost a third of a second at every show) and an escaped HTML
report of the lanes.
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

import anywidget
import traitlets

from ...analysis import ClusterProfile, Profile
from .. import plots
from ..html_parts import list_html, message_html, png_img_html
from .grouping import Grouping, by_server
from .model import TimelineData

HERE = Path(__file__).parent
#: Height of the widget's drawing area in CSS pixels (lanes scroll inside it).
DEFAULT_HEIGHT = 520


class Timeline(anywidget.AnyWidget):
    """The timeline of a Profile or a ClusterProfile: ``Timeline(profile)`` as a cell's value, or
    ``display(Timeline(profile))``.  ``window`` is the visible time range (µs since the first step's
    start); setting it (or :meth:`zoom`, :meth:`zoom_to_step`) moves the view."""

    _esm = HERE / "timeline.js"
    _css = HERE / "timeline.css"

    meta = traitlets.Dict().tag(sync=True)
    window = traitlets.List(traitlets.Float(), default_value=[0.0, 1.0], minlen=2, maxlen=2).tag(sync=True)
    height = traitlets.Int(DEFAULT_HEIGHT).tag(sync=True)

    def __init__(self, profile_or_cluster: Profile | ClusterProfile, group_by: Grouping = by_server,
                 height: int = DEFAULT_HEIGHT, **kwargs: Any) -> None:
        data = TimelineData(profile_or_cluster, group_by)
        super().__init__(meta=data.meta(), window=list(data.extent), height=int(height), **kwargs)
        self.data = data
        self.on_msg(self._on_message)

    # ------------------------------------------------------------------ moving the view
    def zoom(self, t0: float, t1: float) -> None:
        """Show ``[t0, t1]`` (µs since the first step's start)."""
        if not float(t1) > float(t0):
            raise ValueError(f"zoom needs t0 < t1 (got {t0}, {t1})")
        self.window = [float(t0), float(t1)]

    def zoom_to_step(self, step: int) -> None:
        """Show step ``step``'s window; a ValueError listing the steps for one the run does not have."""
        for s, lo, hi in self.data.steps:
            if s == step:
                self.zoom(lo, hi)
                return
        raise ValueError(f"step {step!r} is not in this timeline; steps: {[s for s, _, _ in self.data.steps][:50]}")

    # ------------------------------------------------------------------ requests
    def _on_message(self, _widget: Any, content: dict, _buffers: list) -> None:
        request = content.get("id")
        try:
            reply, buffers = self.answer(content)
        except Exception as exc:  # noqa: BLE001 - a bad request is shown in the widget, never lost in a log
            reply, buffers = {"type": "error", "message": f"{type(exc).__name__}: {exc}"}, []
        reply["id"] = request
        self.send(reply, buffers)

    def answer(self, content: dict) -> tuple[dict, list[bytes]]:
        """The reply to one request of the browser (module docstring): (JSON content, buffers)."""
        kind = content.get("type")
        if kind == "view":
            return self.data.view(content["t0"], content["t1"], content["columns"], list(content["lanes"]),
                                  str(content.get("query") or ""))
        if kind == "op":
            return self.data.op(str(content["name"])), []
        if kind == "detail":
            return self.data.detail(int(content["ref"])), []
        if kind == "search":
            return self.data.search(str(content.get("query") or "")), []
        raise ValueError(f"unknown request type {kind!r}; accepted: view, op, detail, search")

    # ------------------------------------------------------------------ static fallback
    def static_profile(self) -> Profile | None:
        """The run the static figure shows: the Profile, or a cluster's slowest rank."""
        target = self.data.target
        if isinstance(target, Profile):
            return target
        first_rank = next((lane.rank for lane in self.data.lanes if lane.rank is not None), None)
        return target.ranks.get(first_rank) if first_rank is not None else None

    def text_summary(self) -> str:
        """What a terminal shows: the run, the lanes, the time span."""
        t0, t1 = self.data.extent
        shown = [lane.label for lane in self.data.lanes if lane.parent is None]
        return (f"geprof timeline of {self.data.meta()['title']}: {len(self.data.lanes)} lanes over "
                f"{(t1 - t0) / 1000:,.3f} ms ({', '.join(shown)}); interactive in JupyterLab with a running kernel")

    def static_png(self) -> bytes | None:
        """The task Gantt of the last step (of the slowest rank for a cluster) as PNG; None without op tasks."""
        profile = self.static_profile()
        if profile is None:
            return None
        ops = profile.ops()
        if not len(ops):
            return None
        iteration = int(profile.iteration_of_ops.loc[ops.index].max())
        return plots.figure_png(plots.task_gantt(ops, title=f"Tasks per stream of step {iteration}"))

    def static_html(self, png: bytes | None) -> str:
        """The escaped HTML report: a heading, the last step's task Gantt, the lanes."""
        title = html.escape(f"Timeline of {self.data.meta()['title']}")
        figure = png_img_html(png, "task Gantt per stream of the last step") if png is not None \
            else message_html(plots.EMPTY_OPS_MESSAGE)
        lanes = list_html([lane.label + (f" ({lane.note})" if lane.note else "")
                           for lane in self.data.lanes if lane.parent is None], "geprof-timeline-lanes")
        note = message_html("This is the static view; the interactive timeline (zoom, pan, hover, search) needs "
                            "JupyterLab with a running kernel.")
        return f'<div class="geprof-timeline-static"><h4>{title}</h4>{figure}{note}<p>Lanes:</p>{lanes}</div>'

    def _repr_mimebundle_(self, **kwargs: Any) -> tuple[dict, dict] | None:
        bundle = super()._repr_mimebundle_(**kwargs)
        if bundle is None:
            return None
        data, metadata = bundle
        png = self.static_png()
        if png is not None:
            data["image/png"] = png
        data["text/html"] = self.static_html(png)
        data["text/plain"] = self.text_summary()
        return data, metadata
