"""The options panel (``%geprof config``): an ipywidgets form whose values are the
defaults of later ``%%geprof`` cells.

Every field a ``%%geprof`` flag sets is here: the profilingOptions fields
(:data:`~.config.PROFILING_FLAGS`), the simulation settings (executor, clock,
device preset) and the step schedule.  A change is validated at once
(:func:`~geprof_nb.prof.options.validate_field` for profilingOptions, the
schedule as a whole); a valid value goes into the magic's
:class:`~.config.ConfigStore`, an invalid one is shown in red next to its field,
saying what is accepted, and changes nothing.  A flag on a cell overrides the
panel for that cell.

The panel shows the equivalent flag line (only values that differ from the
built-in defaults), and a text box where pasting a flag line (``%%geprof``
prefix optional) sets the whole panel to it: the line is parsed by the magic's
own argparse parser, so the grammar is the same, and the round trip holds both
ways (line -> panel -> line, panel -> line -> panel).

The root widget has the CSS class ``geprof-config``; the aic_metrics dropdown
``geprof-aic-metrics``.  Values change through the widgets' observed ``value``
traits, so a change made in the browser applies exactly like one made from
Python.  Displayed without a widget front end, the panel's text/plain twin is
the current defaults as a flag line.
"""

from __future__ import annotations

import html
from typing import Any

import ipywidgets as widgets
from IPython.core.error import UsageError

from ..ge import session as ge_session
from ..ge.device import DEFAULT_DEVICE, PRESETS
from ..ge.session import DEFAULT_EXECUTOR
from ..prof.events import AIC_METRICS
from ..prof.options import GE_API_LEVELS, ON_OFF, TASK_TRACE_LEVELS
from .config import CONFIG_FIELDS, FLAG_OF, PROFILING_FLAGS, SCHEDULE_FIELD_NAMES, ConfigError, ConfigStore, flag_line

__all__ = ["ConfigError", "ConfigPanel", "graph_op_names"]

ERROR_STYLE = "color:#c62828"
OK_STYLE = "color:#2e7d32"
HELP = {field: help_text for _, field, _, help_text in PROFILING_FLAGS}
HELP.update({
    "executor": f"GE executor (default: as GE is initialised, {DEFAULT_EXECUTOR})",
    "clock": "real: host time is your code's wall time, never geprof's own work; virtual: runs repeat exactly "
             "(default: as GE is initialised, real)",
    "device": f"device preset for a GE initialised in the cell (default: {DEFAULT_DEVICE})",
    "ranks": "ranks simulated together, one run directory each (0: as the session's options say)",
    "skip_first": "steps not profiled at the start",
    "wait": "steps off at the start of each cycle",
    "warmup": "steps collected and discarded before the active ones",
    "active": "steps recorded per cycle (0: no schedule, every step is recorded)",
    "repeat": "cycles (0: until the cell ends)",
})
SECTIONS = (
    ("What to collect", ("task_trace", "aic_metrics", "training_trace", "fp_point", "bp_point")),
    ("More layers", ("hccl", "aicpu", "msproftx", "runtime_api", "task_memory", "ge_api")),
    ("Where", ("output", "storage_limit", "checkpoint_interval")),
    ("Simulation", ("executor", "clock", "device", "ranks")),
    ("Step schedule (torch.profiler.schedule; a step is one run_graph / aclmdlExecute)", SCHEDULE_FIELD_NAMES),
)
assert sorted(f for _, fs in SECTIONS for f in fs) == sorted(CONFIG_FIELDS)


def graph_op_names(graph: Any = None) -> list[str]:
    """Node names of ``graph`` (default: the last graph added to a GE session) to suggest as FP/BP points."""
    graph = ge_session.last_graph() if graph is None else graph
    if graph is None:
        return []
    return list(dict.fromkeys(n.name for n in graph.nodes if n.type != "NetOutput"))


def _message(text: str, ok: bool = False) -> str:
    if not text:
        return ""
    cls = "geprof-field-ok" if ok else "geprof-field-error"
    return f'<span class="{cls}" style="{OK_STYLE if ok else ERROR_STYLE}">{html.escape(text)}</span>'


class ConfigPanel:
    """The ``%geprof config`` form over a :class:`~.config.ConfigStore`.

    ``fields[field]`` is the input widget of each field, ``messages[field]``
    the (HTML) message next to it, ``paste`` the flag-line box, ``widget`` the
    root (``VBox`` with class ``geprof-config``).
    """

    def __init__(self, store: ConfigStore) -> None:
        self.store = store
        self.fields: dict[str, widgets.Widget] = {}
        self.messages: dict[str, widgets.HTML] = {}
        self._syncing = False
        self._shown = dict(store.values)
        for field in CONFIG_FIELDS:
            self.fields[field] = self._make(field, store.values[field])
            self.messages[field] = widgets.HTML(layout=widgets.Layout(margin="0 0 0 8px"))
            self.fields[field].observe(self._observer(field), names="value")
        self.fields["aic_metrics"].add_class("geprof-aic-metrics")
        self.line_html = widgets.HTML()
        self.line_html.add_class("geprof-config-line")
        self.paste = widgets.Text(placeholder="paste a %%geprof flag line, then Enter", continuous_update=False,
                                  layout=widgets.Layout(width="60%"))
        self.paste.add_class("geprof-config-paste")
        self.paste_message = widgets.HTML()
        self.paste.observe(self._on_paste, names="value")
        self.reset_button = widgets.Button(description="Reset to defaults", icon="undo")
        self.reset_button.on_click(lambda _: self.reset())
        self.widget = self._layout()
        self.widget.add_class("geprof-config")
        self.refresh_suggestions()
        self._show_line()
        store.add_listener(self._on_store)

    # ------------------------------------------------------------------ building
    def _make(self, field: str, value: Any) -> widgets.Widget:
        text_layout = widgets.Layout(width="22em")
        if field == "aic_metrics":
            options = list(AIC_METRICS) if value in AIC_METRICS else [*AIC_METRICS, value]
            return widgets.Dropdown(options=options, value=value, layout=widgets.Layout(width="22em"))
        if field == "task_trace":
            return widgets.ToggleButtons(options=list(TASK_TRACE_LEVELS), value=value)
        if field == "ge_api":
            return widgets.ToggleButtons(options=list(GE_API_LEVELS), value=value)
        if field in ("training_trace", "hccl", "aicpu", "msproftx", "runtime_api", "task_memory"):
            return widgets.ToggleButtons(options=list(ON_OFF), value=value)
        if field in ("output", "storage_limit", "checkpoint_interval"):
            placeholder = {"storage_limit": "e.g. 500MB (at least 200MB); empty: no limit",
                           "checkpoint_interval": "seconds, 0.1 to 3600; empty: 1"}.get(field, "directory")
            return widgets.Text(value=value, placeholder=placeholder, continuous_update=False, layout=text_layout)
        if field in ("fp_point", "bp_point"):
            return widgets.Combobox(value=value, options=[], ensure_option=False, continuous_update=False,
                                    placeholder="auto-detect (or an op name of the graph)", layout=text_layout)
        if field == "executor":
            return widgets.ToggleButtons(options=[("as initialised", ""), ("v2", "v2"), ("v1", "v1")], value=value)
        if field == "clock":
            return widgets.ToggleButtons(options=[("as initialised", ""), ("real", "real"), ("virtual", "virtual")],
                                         value=value)
        if field == "device":
            custom = [] if value in ("", *PRESETS) else [(value, value)]  # a what-if spec set by a flag line
            return widgets.Dropdown(options=[("as initialised", "")] + [(name, name) for name in PRESETS] + custom,
                                    value=value, layout=widgets.Layout(width="22em"))
        if field in SCHEDULE_FIELD_NAMES or field == "ranks":
            return widgets.IntText(value=value, continuous_update=False, layout=widgets.Layout(width="7em"))
        raise KeyError(field)

    def _row(self, field: str) -> widgets.Widget:
        label = widgets.HTML(f"<code>{html.escape(FLAG_OF[field])}</code>", tooltip=HELP.get(field, ""),
                             layout=widgets.Layout(width="11em"))
        row = widgets.HBox([label, self.fields[field], self.messages[field]],
                           layout=widgets.Layout(align_items="center"))
        row.add_class(f"geprof-config-{field.replace('_', '-')}")
        return row

    def _layout(self) -> widgets.VBox:
        parts: list[widgets.Widget] = [widgets.HTML("<b>%%geprof defaults</b> (flags on a cell override them)")]
        for title, fields in SECTIONS:
            parts.append(widgets.HTML(f"<i>{html.escape(title)}</i>"))
            parts.extend(self._row(f) for f in fields)
        parts.append(widgets.HBox([widgets.HTML("equivalent line:&nbsp;"), self.line_html]))
        parts.append(widgets.HBox([self.paste, self.paste_message], layout=widgets.Layout(align_items="center")))
        parts.append(self.reset_button)
        return widgets.VBox(parts)

    # ------------------------------------------------------------------ values
    @property
    def line(self) -> str:
        """The stored defaults as a ``%%geprof`` flag line (only non-default values)."""
        return self.store.line()

    def values(self) -> dict[str, Any]:
        """What the panel's widgets show now (may hold a value that failed validation)."""
        return {field: w.value for field, w in self.fields.items()}

    def text(self) -> str:
        line = self.line
        return f"%%geprof defaults: {line}" if line else "%%geprof defaults: the built-in ones (no flags)"

    def _observer(self, field: str):
        def on_change(change: dict) -> None:
            if not self._syncing:
                self._edit(field, change["new"])

        return on_change

    def _edit(self, field: str, value: Any) -> None:
        """A field was changed (from Python or the browser): validate, store, or show why not."""
        group = SCHEDULE_FIELD_NAMES if field in SCHEDULE_FIELD_NAMES else (field,)
        changes = {f: (value if f == field else self.fields[f].value) for f in group}
        try:
            self.store.update(changes)
        except ConfigError as exc:
            self.messages[exc.field if exc.field in group else field].value = _message(exc.message)
            return
        for f in group:
            self.messages[f].value = ""

    def _on_paste(self, change: dict) -> None:
        text = change["new"].strip()
        if not text:
            return
        self.apply_line(text)

    def apply_line(self, line: str) -> str:
        """Set the panel (and the defaults) to a flag line; returns the message shown beside the box."""
        try:
            ignored = self.store.set_line(line)
        except (UsageError, ConfigError) as exc:
            self.paste_message.value = _message(str(exc))
            return str(exc)
        self._sync(force=True)
        msg = "panel set from the line"
        if ignored:
            msg += f" (ignored, they belong to one cell: {', '.join(ignored)})"
        self.paste_message.value = _message(msg, ok=True)
        return msg

    def reset(self) -> None:
        """The "Reset to defaults" button: the built-in defaults, and the paste box and its message
        cleared (they spoke of a line the panel no longer shows)."""
        self.store.reset()
        self.paste.value = ""
        self.paste_message.value = ""

    # ------------------------------------------------------------------ syncing
    def _on_store(self, event: str) -> None:
        if event == "cell":
            self.refresh_suggestions()
        else:
            self._sync()

    def _sync(self, force: bool = False) -> None:
        """Show the stored values (fields whose stored value changed, or all with ``force``)."""
        values = self.store.values
        self._syncing = True
        try:
            for field, w in self.fields.items():
                if force or values[field] != self._shown[field]:
                    if field == "aic_metrics" and values[field] not in w.options:
                        w.options = [*AIC_METRICS, values[field]]
                    if field == "device" and values[field] not in [v for _, v in w.options]:
                        w.options = [*w.options, (values[field], values[field])]  # a what-if spec
                    w.value = values[field]
                    self.messages[field].value = ""
        finally:
            self._syncing = False
        self._shown = dict(values)
        self._show_line()

    def _show_line(self) -> None:
        line = flag_line(self.store.values)
        self.line_html.value = f"<code>%%geprof {html.escape(line)}</code>" if line else "<code>%%geprof</code>"

    def refresh_suggestions(self) -> None:
        """FP/BP point suggestions from the op names of the last graph added to a session."""
        names = graph_op_names()
        for field in ("fp_point", "bp_point"):
            self.fields[field].options = names

    def close(self) -> None:
        self.widget.close()

    # ------------------------------------------------------------------ display
    def _repr_mimebundle_(self, **kwargs: Any) -> dict:
        data = dict(self.widget._repr_mimebundle_(**kwargs) or {})
        data["text/plain"] = self.text()
        return data

    def __repr__(self) -> str:
        return f"<geprof ConfigPanel: {self.text()}>"
