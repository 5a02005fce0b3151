"""``%%geprof``: profile a notebook cell on the simulated GE runtime.

The magic turns its flags (over the defaults ``%geprof config`` set, see
:class:`ConfigStore`) into profilingOptions, opens a run through the msprof
library (which starts GE's collection through its control callback, whether GE
is already initialised or the cell initialises it), runs the cell, finalises
the run and shows the result.

* A *step schedule* (``--skip-first/--wait/--warmup/--active/--repeat``,
  ``torch.profiler.schedule`` semantics, :mod:`geprof_nb.prof.step_schedule`)
  decides per step (``run_graph``, ``run_graph_async``, ``aclmdlExecute``)
  whether msprof collects, through the same Start/Stop control path as the C
  API.  Without one every step of the cell is collected.
* A progress line (:mod:`.progress`) shows steps, simulated device time and the
  records reported to msprof while a long cell runs.
* If the cell raises or is interrupted (Ctrl-C), what was collected is still
  finalised and shown, then the error propagates with the user's traceback.
  Ctrl-C during a step takes effect when the step is over, so the run never
  holds half a step.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import weakref
from dataclasses import dataclass
from typing import Any, Callable

from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, line_magic, magics_class
from IPython.core.magic_arguments import argument, argument_group, kwds, magic_arguments, parse_argstring
from IPython.display import display

from .. import ge
from ..analysis import Profile, load
from ..ge.device import DEFAULT_DEVICE, PRESETS
from ..ge.session import DEFAULT_EXECUTOR, EXECUTORS, step_hooks
from ..prof import msprof
from ..prof.clock import CLOCK_MODES, clock
from ..prof.events import AIC_METRICS
from ..prof.options import ProfilingOptions, ProfilingOptionsError, validate_field
from ..prof.step_schedule import FIELDS as SCHEDULE_FIELDS
from ..prof.step_schedule import NONE, WARMUP, ScheduledCollection, StepSchedule, StepScheduleError
from . import commands
from . import display as nb_display
from . import progress as nb_progress

#: Defaults of the magic where they differ from GE's: a notebook wants the step timeline.
MAGIC_DEFAULTS = {
    "output": "geprof_output",
    "training_trace": "on",
    "task_trace": "on",
    "aic_metrics": "PipeUtilization",
}


def _field_type(field: str):
    """An argparse ``type`` that validates a flag value as the profilingOptions field."""

    def convert(value: str) -> str:
        try:
            return validate_field(field, value)
        except ProfilingOptionsError as exc:
            raise argparse.ArgumentTypeError(f"{value!r} is not valid; accepted: {exc.accepted}") from None

    convert.__name__ = field
    return convert


def _count_type(flag: str):
    """An argparse ``type`` for a schedule field: a whole number >= 0."""

    def convert(value: str) -> int:
        try:
            n = int(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{value!r} is not a whole number; accepted: 0, 1, 2, ...") from None
        if n < 0:
            raise argparse.ArgumentTypeError(f"{n} is negative; accepted: 0, 1, 2, ...")
        return n

    convert.__name__ = flag.lstrip("-").replace("-", "_")
    return convert


#: (flag, profilingOptions field, metavar, help)
PROFILING_FLAGS = [
    ("--output", "output", "DIR", "directory for run directories (default: geprof_output)"),
    ("--training-trace", "training_trace", "on|off", "FP/BP step trace (default: on)"),
    ("--task-trace", "task_trace", "on|off|l0|l1", "task time: l1 with op info and PMU, l0 times only (default: on = l1)"),
    ("--fp-point", "fp_point", "OP", "op that starts the forward pass (default: auto-detect)"),
    ("--bp-point", "bp_point", "OP", "op that ends the backward pass (default: auto-detect)"),
    ("--hccl", "hccl", "on|off", "collective communication data (default: off)"),
    ("--aicpu", "aicpu", "on|off", "AI CPU data (default: off)"),
    ("--aic-metrics", "aic_metrics", "GROUP", "AI Core PMU group: " + ", ".join(AIC_METRICS) + " (default: PipeUtilization)"),
    ("--msproftx", "msproftx", "on|off", "msproftx / mstx ranges (default: off)"),
    ("--ge-api", "ge_api", "off|l0|l1", "GE API and host scheduling of dynamic-shape ops (default: off)"),
    ("--runtime-api", "runtime_api", "on|off", "runtime API calls (default: off)"),
    ("--task-memory", "task_memory", "on|off", "static memory plan events (geprof extension; default: off)"),
    ("--storage-limit", "storage_limit", "SIZE", "delete the oldest data past this size, e.g. 500MB (>= 200MB)"),
]

#: (flag, field, accepted values) of the simulation settings; "" means: as GE is initialised.
SIMULATION_FLAGS = [
    ("--executor", "executor", tuple(sorted(EXECUTORS))),
    ("--clock", "clock", tuple(CLOCK_MODES)),
    ("--device", "device", tuple(PRESETS)),
]

PROFILING_FIELDS = tuple(field for _, field, _, _ in PROFILING_FLAGS)
SIMULATION_FIELDS = tuple(field for _, field, _ in SIMULATION_FLAGS)
SCHEDULE_FIELD_NAMES = tuple(field for field, _ in SCHEDULE_FIELDS)
#: Every field a flag line / the options panel sets, in flag-line order.
CONFIG_FIELDS = PROFILING_FIELDS + SIMULATION_FIELDS + SCHEDULE_FIELD_NAMES
FLAG_OF: dict[str, str] = {field: flag for flag, field, _, _ in PROFILING_FLAGS}
FLAG_OF.update({field: flag for flag, field, _ in SIMULATION_FLAGS})
FLAG_OF.update({field: flag for field, flag in SCHEDULE_FIELDS})
#: Flags of a line that belong to one cell, not to the defaults.
CELL_ONLY = {"name": "-o", "no_display": "--no-display"}


def _profiling_flags(func):
    for flag, field, metavar, help_text in reversed(PROFILING_FLAGS):
        func = argument(flag, dest=field, type=_field_type(field), default=None, metavar=metavar, help=help_text)(func)
    return func


def builtin_defaults() -> dict[str, Any]:
    """The defaults of every flag-line field before ``%geprof config`` changes any."""
    base = ProfilingOptions()
    values: dict[str, Any] = {field: getattr(base, field) for field in PROFILING_FIELDS}
    values.update(MAGIC_DEFAULTS)
    values.update({field: "" for field in SIMULATION_FIELDS})
    values.update({field: 0 for field in SCHEDULE_FIELD_NAMES})
    return values


def options_from_args(args: argparse.Namespace, defaults: dict[str, str] | None = None) -> ProfilingOptions:
    """profilingOptions from parsed flags over ``defaults`` over :data:`MAGIC_DEFAULTS`."""
    values = dict(MAGIC_DEFAULTS)
    values.update({k: v for k, v in (defaults or {}).items() if k in PROFILING_FIELDS})
    for _, field, _, _ in PROFILING_FLAGS:
        v = getattr(args, field, None)
        if v is not None:
            values[field] = v
    return ProfilingOptions.parse(values)


class ConfigError(ValueError):
    """A flag-line field has a bad value: ``field``, its ``flag`` and a message saying what is accepted."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        self.flag = FLAG_OF.get(field, field)
        self.message = message
        super().__init__(f"{self.flag}: {message}")


def validate_config_field(field: str, value: Any) -> Any:
    """The canonical value of one field, or :class:`ConfigError` saying what is accepted."""
    if field in PROFILING_FIELDS:
        try:
            value = validate_field(field, value)
        except ProfilingOptionsError as exc:
            detail = str(exc).split(": ", 1)[-1]  # drop "profiling option 'x'" (the flag is named instead)
            raise ConfigError(field, detail) from None
        if any(c.isspace() or c in "'\"" for c in value):
            # IPython's magic grammar (arg_split, not posix) keeps quotes: such a value has no flag-line form
            raise ConfigError(field, f"{value!r} has a space or a quote; accepted: one word without spaces or "
                                     "quotes (the %%geprof flag line cannot carry them)")
        return value
    if field in SIMULATION_FIELDS:
        accepted = dict((f, a) for _, f, a in SIMULATION_FLAGS)[field]
        if value in ("", None):
            return ""
        if value not in accepted:
            raise ConfigError(field, f"{value!r} is not valid; accepted: {', '.join(accepted)} (or empty: "
                                     "as GE is initialised)")
        return value
    if field in SCHEDULE_FIELD_NAMES:
        try:
            n = int(value)
        except (TypeError, ValueError):
            raise ConfigError(field, f"{value!r} is not a whole number; accepted: 0, 1, 2, ...") from None
        if isinstance(value, bool) or (isinstance(value, float) and value != n):
            raise ConfigError(field, f"{value!r} is not a whole number; accepted: 0, 1, 2, ...")
        if n < 0:
            raise ConfigError(field, f"{n} is negative; accepted: 0, 1, 2, ...")
        return n
    raise ConfigError(field, f"unknown field; known: {', '.join(CONFIG_FIELDS)}")


def schedule_from(values: dict[str, Any]) -> StepSchedule | None:
    """The step schedule of a set of field values (``None``: profile every step); ConfigError if invalid."""
    try:
        return StepSchedule.from_fields(**{f: int(values[f]) for f in SCHEDULE_FIELD_NAMES})
    except StepScheduleError as exc:
        raise ConfigError(exc.field, str(exc).split(": ", 1)[-1]) from None


def flag_line(values: dict[str, Any], defaults: dict[str, Any] | None = None) -> str:
    """The ``%%geprof`` flags of ``values`` that differ from ``defaults`` (the built-in ones by default)."""
    defaults = builtin_defaults() if defaults is None else defaults
    parts = []
    for field in CONFIG_FIELDS:
        value = values.get(field, defaults[field])
        if value != defaults[field]:
            parts.append(f"{FLAG_OF[field]} {value}")  # values are single words (validate_config_field)
    return " ".join(parts)


class ConfigStore:
    """The defaults of later ``%%geprof`` cells: what the options panel and ``%geprof config`` set.

    ``values`` holds every field of :data:`CONFIG_FIELDS` (profilingOptions
    fields as strings, ``executor``/``clock``/``device`` as a choice or "" for
    "as GE is initialised", schedule fields as ints).  Changes are validated as
    a whole before any is stored: an invalid value never changes the defaults.
    Flags on a cell override these values for that cell only.
    """

    def __init__(self) -> None:
        self.values: dict[str, Any] = builtin_defaults()
        self._listeners: list[Callable[[], Callable[[str], None] | None]] = []

    # ------------------------------------------------------------------ reading
    @property
    def defaults(self) -> dict[str, Any]:
        return builtin_defaults()

    def changed(self) -> dict[str, Any]:
        """Fields whose value differs from the built-in default."""
        base = builtin_defaults()
        return {k: v for k, v in self.values.items() if v != base[k]}

    def line(self) -> str:
        """The current defaults as a ``%%geprof`` flag line (only non-default values)."""
        return flag_line(self.values)

    # ------------------------------------------------------------------ writing
    def check(self, changes: dict[str, Any], base: dict[str, Any] | None = None) -> dict[str, Any]:
        """``base`` (default: the current values) with ``changes`` applied and validated; nothing is stored."""
        values = dict(self.values if base is None else base)
        for field, value in changes.items():
            values[field] = validate_config_field(field, value)
        schedule_from(values)
        return values

    def update(self, changes: dict[str, Any], base: dict[str, Any] | None = None) -> None:
        """Validate and store ``changes`` (over ``base``); :class:`ConfigError` leaves the values as they were."""
        values = self.check(changes, base)
        if values != self.values:
            self.values = values
            self._notify("values")

    def reset(self) -> None:
        """Back to the built-in defaults."""
        self.update({}, base=builtin_defaults())

    def parse_line(self, line: str) -> tuple[dict[str, Any], list[str]]:
        """The fields a ``%%geprof`` flag line sets, and the per-cell flags it had (which are ignored).

        The line is parsed by the magic's own argparse parser (so the grammar is
        the cell magic's); a leading ``%%geprof`` is allowed.  Errors are
        ``UsageError`` with argparse's message naming the flag.
        """
        text = line.strip()
        for prefix in ("%%geprof", "%geprof"):
            if text.startswith(prefix):
                text = text[len(prefix):]
                break
        args = parse_argstring(GeprofMagics.geprof, text)
        fields = {field: getattr(args, field) for field in CONFIG_FIELDS if getattr(args, field, None) is not None}
        ignored = [flag for dest, flag in CELL_ONLY.items() if getattr(args, dest, None) not in (None, False)]
        return fields, ignored

    def set_line(self, line: str, merge: bool = False) -> list[str]:
        """Set the defaults to a flag line: the line's values, every other field at its default
        (``merge``: other fields keep their current value).  Returns the ignored per-cell flags."""
        fields, ignored = self.parse_line(line)
        self.update(fields, base=None if merge else builtin_defaults())
        return ignored

    # ---------------------------------------------------------------- listeners
    def add_listener(self, callback: Callable[[str], None]) -> None:
        """``callback(event)`` after a change (``"values"``) or a ``%%geprof`` cell (``"cell"``); held weakly
        when it is a bound method."""
        ref = weakref.WeakMethod(callback) if hasattr(callback, "__self__") else (lambda: callback)
        self._listeners.append(ref)

    def _notify(self, event: str) -> None:
        alive = []
        for ref in self._listeners:
            cb = ref()
            if cb is not None:
                alive.append(ref)
                cb(event)
        self._listeners = alive

    def cell_ran(self) -> None:
        self._notify("cell")


@dataclass
class CellSettings:
    """What one ``%%geprof`` cell runs with: the panel's defaults with the cell's flags over them."""

    values: dict[str, Any]
    options: ProfilingOptions
    schedule: StepSchedule | None

    @property
    def line(self) -> str:
        """The equivalent flag line (non-default values only)."""
        return flag_line(self.values)

    def simulation(self) -> dict[str, str | None]:
        return {"executor": self.values["executor"] or None, "clock_mode": self.values["clock"] or None,
                "device": self.values["device"] or None}


def cell_settings(args: argparse.Namespace, store: ConfigStore | None) -> CellSettings:
    """Merge the cell's flags over the stored defaults; ``UsageError`` naming the flag if invalid."""
    values = dict(store.values if store is not None else builtin_defaults())
    for field in CONFIG_FIELDS:
        v = getattr(args, field, None)
        if v is not None:
            values[field] = v
    try:
        options = options_from_args(args, values)
        schedule = schedule_from(values)
    except ProfilingOptionsError as exc:
        raise UsageError(str(exc)) from None
    except ConfigError as exc:
        raise UsageError(str(exc)) from None
    return CellSettings(values, options, schedule)


_PHASE = {NONE: "not profiled", WARMUP: "warmup (collected, discarded)", "record": "recording",
          "record_and_save": "recording"}


class _CellSteps:
    """The step hook of one ``%%geprof`` cell: schedule, progress, Ctrl-C at step boundaries."""

    def __init__(self, collection: ScheduledCollection | None, progress: nb_progress.Progress,
                 guard: nb_progress.InterruptGuard) -> None:
        self.collection = collection
        self.progress = progress
        self.guard = guard
        self.steps = 0

    def before_step(self, info: Any) -> None:
        self.guard.enter()
        if self.collection is not None:
            try:
                self.collection.before_step()
            except BaseException:
                self.guard.exit(raise_pending=False)
                raise

    def after_step(self, info: Any) -> None:
        try:
            if self.collection is not None:
                self.collection.after_step(info.ran)
            if info.ran:
                self.steps += 1
                self._show()
        finally:
            self.guard.exit()  # a Ctrl-C during the step is raised here, once the step is complete

    def _show(self) -> None:
        c = self.collection
        try:
            if c is None:
                self.progress.step(self.steps)
            else:
                self.progress.step(self.steps, len(c.recorded), _PHASE[c.current_action])
        except Exception:  # noqa: BLE001 - a broken display must not break the run
            self.progress.mode = "off"


CELL_EPILOG = """
Defaults: `%geprof config` (the options panel) sets the defaults of every flag
above; a flag on the cell overrides them for that cell.  Without a step
schedule every step of the cell is collected.

Step schedule (torch.profiler.schedule semantics; a step is one run_graph,
run_graph_async or aclmdlExecute call, counted from 0 in the cell): the first
--skip-first steps are not profiled, then cycles of --wait steps off, --warmup
steps collected and discarded, --active steps recorded; --repeat cycles
(0: until the cell ends).  The Profile holds exactly the recorded steps; its
notes say which steps they were.

While the cell runs, a progress line shows steps, simulated device time and
records reported to msprof.  Ctrl-C stops the cell at the end of the current step: the
data collected so far is finalised, shown and bound, then KeyboardInterrupt is
raised.  The Profile is bound to _geprof (and to NAME with -o).

Examples::

  %%geprof --aic-metrics PipeUtilization --training-trace on
  sess = ge.Session()
  sess.add_graph(1, ge.models.resnet50(batch_size=32, training=True, world_size=8))
  for step in range(10):
      sess.run_graph(1)

  %%geprof --skip-first 10 --wait 1 --warmup 1 --active 3 --repeat 2 --clock virtual -o sched
  for step in range(100):       # records steps 12-14 and 17-19
      sess.run_graph(1)

  %%geprof --aic-metrics Memory --hccl on --task-memory on --storage-limit 500MB
  %%geprof --task-trace l0 --ge-api l1 --executor v1      # dynamic shapes: host scheduling
  %%geprof --fp-point dense_1/MatMulV2 --bp-point dense_0/Relu          # your own FP/BP points
  %%geprof --device Ascend910A --clock virtual -o run_a --no-display
  %%geprof --output ./prof --runtime-api on --msproftx on --aicpu on
"""

LINE_DOC = """Work with geprof: ``%geprof COMMAND [...]`` (``%geprof help`` prints every command's options).

Commands, with an example each::

  %geprof config                     # the options panel: defaults of later %%geprof cells
  %geprof config --aic-metrics Memory --active 3   # set some defaults without the panel
  %geprof config --reset             # back to the built-in defaults
  %geprof show run1                  # show a Profile's report (default: _geprof)
  %geprof load ./geprof_output -o latest   # a run, an output dir, real msprof / torch_npu output
  %geprof export run1 --format ascend_pt --to ./for_msprof_analyze   # msprof|ascend_pt|chrome|parquet
  %geprof compare run1 run2          # how run2 differs from run1 (variables or paths)
  %geprof advise run1                # findings ranked High/Medium/Low with evidence
  %geprof help                       # this list, and the %%geprof flags

Names are Profile variables of the notebook or paths to load.  ``%%geprof?``
explains the cell magic's flags (every profilingOptions field, the simulation
settings and the step schedule) with examples.
"""


@magics_class
class GeprofMagics(Magics):
    """The ``%%geprof`` cell magic and the ``%geprof`` line magic."""

    def __init__(self, shell: Any) -> None:
        super().__init__(shell)
        self.last_profile: Profile | None = None
        #: Defaults of later cells (``%geprof config``); one store per loaded extension.
        self.cell_defaults = ConfigStore()

    @magic_arguments()
    @kwds(epilog=CELL_EPILOG)
    @argument_group("profilingOptions fields")
    @_profiling_flags
    @argument_group("simulation (default: as GE is initialised)")
    @argument("--executor", choices=sorted(EXECUTORS), default=None,
              help="GE executor: v2 (RT2) or v1 (hybrid); matters most for dynamic shapes "
                   f"(default: {DEFAULT_EXECUTOR})")
    @argument("--clock", choices=list(CLOCK_MODES), default=None,
              help="real: host time is wall time; virtual: fixed host costs, runs repeat exactly (default: real)")
    @argument("--device", choices=list(PRESETS), default=None,
              help="device preset (GE option geprof.device) for a GE initialised in the cell "
                   f"(default: {DEFAULT_DEVICE})")
    @argument_group("step schedule (torch.profiler.schedule)")
    @argument("--skip-first", dest="skip_first", type=_count_type("--skip-first"), default=None, metavar="N",
              help="steps not profiled at the start (default: 0)")
    @argument("--wait", type=_count_type("--wait"), default=None, metavar="N",
              help="steps off at the start of each cycle (default: 0)")
    @argument("--warmup", type=_count_type("--warmup"), default=None, metavar="N",
              help="steps collected then discarded before the active ones (default: 0)")
    @argument("--active", type=_count_type("--active"), default=None, metavar="N",
              help="steps recorded per cycle; 0 (default) = no schedule, every step is recorded")
    @argument("--repeat", type=_count_type("--repeat"), default=None, metavar="N",
              help="number of cycles; 0 (default) = until the cell ends")
    @argument_group("the cell")
    @argument("-o", dest="name", default=None, metavar="NAME",
              help="also bind the Profile to this variable (it is always bound to _geprof)")
    @argument("--no-display", action="store_true", help="collect and bind the Profile, show nothing (no progress)")
    @cell_magic
    def geprof(self, line: str, cell: str) -> None:
        """Profile the cell on the simulated GE runtime and show op and step tables.

        Every profilingOptions field that changes what is collected has a flag;
        values are checked like GE checks the JSON.  The Profile's tables include
        op_summary, op_statistic, step_trace, task_time, api_statistic,
        host_events, msprof_tx, communication_statistic, aicpu, operator_memory.
        """
        __tracebackhide__ = True  # noqa: F841 - IPython hides this frame in tracebacks
        args = parse_argstring(self.geprof, line)
        if args.name is not None and not args.name.isidentifier():
            raise UsageError(f"-o NAME must be a Python identifier, got {args.name!r}")
        settings = cell_settings(args, self.cell_defaults)
        if msprof.lib.running:
            raise UsageError(f"profiling is already collecting into {msprof.lib.run_dir}; finish that run first "
                             "(ge.GEFinalize() for GE options, aclgrphProfFinalize() for the C API)")
        stack = contextlib.ExitStack()
        try:
            stack.enter_context(ge.simulation_settings(**settings.simulation()))
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        with stack:
            mode = "off" if args.no_display else nb_progress.frontend_mode(self.shell)
            run_dir, error = self._profile_cell(cell, settings, mode)
        profile = load(run_dir)
        self.last_profile = profile
        self.shell.user_ns["_geprof"] = profile
        if args.name:
            self.shell.user_ns[args.name] = profile
        self.cell_defaults.cell_ran()
        if not args.no_display:
            nb_display.show_profile(profile)
        if error is not None:
            raise error

    # The usage line of %%geprof? reads "%%geprof" (IPython's formatter prefixes one "%" to the prog).
    geprof.parser.prog = "%geprof"
    geprof.__doc__ = geprof.parser.format_help()

    def _profile_cell(self, cell: str, settings: CellSettings, progress_mode: str):
        """Collect while the cell runs; returns the finalised run directory and the cell's exception."""
        options = settings.options
        switch = options.data_type_config()
        schedule = settings.schedule
        msprof.lib.init(options.output, options.to_dict(), mode="magic")
        magic_info = {"line": settings.line, "executor": settings.values["executor"] or None,
                      "clock": clock.mode, "device": settings.values["device"] or None}
        error: BaseException | None = None
        collection = ScheduledCollection(schedule, switch, msprof.lib) if schedule is not None else None
        progress = nb_progress.Progress(progress_mode, total=schedule.total_steps if schedule else None)
        guard = nb_progress.InterruptGuard()
        hook = _CellSteps(collection, progress, guard)
        run_dir = None
        try:
            guard.install()
            if collection is None:
                msprof.lib.start(switch)
            step_hooks.add(hook)
            self._run_cell(cell)
        except BaseException as exc:  # noqa: BLE001 - finalise and show, then re-raise in geprof()
            error = exc
        finally:
            guard.enter()  # a Ctrl-C while the run is finalised waits until it is on disk
            try:
                step_hooks.remove(hook)
                interrupted = isinstance(error, KeyboardInterrupt)
                if interrupted:
                    note = (f"the profiled cell was interrupted (KeyboardInterrupt) after {hook.steps} "
                            f"step{'s' * (hook.steps != 1)}; the data of the completed steps is kept")
                elif error is not None:
                    note = f"the profiled cell raised {type(error).__name__}: {error}"
                else:
                    note = ""
                try:
                    if collection is not None:
                        collection.finish()  # closes an open window (a warmup one: its data is discarded)
                    magic_info["steps"] = hook.steps
                    msprof.lib.set_run_info("magic", magic_info)
                finally:
                    run_dir = msprof.lib.finalize(note=note)  # flushes the runtime's pending device records
                try:
                    progress.finish("done" if error is None else
                                    "interrupted" if interrupted else f"stopped by {type(error).__name__}")
                except Exception:  # noqa: BLE001 - the display of progress never hides the run
                    pass
            finally:
                late = guard.exit(raise_pending=False)
                guard.uninstall()
        if late and error is None:
            error = KeyboardInterrupt()
        return run_dir, error

    @line_magic("geprof")
    def geprof_line(self, line: str) -> Any:
        __tracebackhide__ = True  # noqa: F841
        return commands.run(self.shell, line, self.geprof.__doc__ or "", config=self.cell_defaults)

    geprof_line.__doc__ = LINE_DOC

    def _run_cell(self, cell: str) -> None:
        """Run the cell in the user namespace like IPython would; show the last expression's value."""
        code = self.shell.transform_cell(cell)
        tree = self.shell.transform_ast(self.shell.compile.ast_parse(code))
        last = None
        if tree.body and isinstance(tree.body[-1], ast.Expr):
            last = ast.Expression(tree.body.pop().value)
        filename = self.shell.compile.cache(code)
        ns = self.shell.user_ns
        exec(self.shell.compile(tree, filename, "exec"), ns)  # noqa: S102 - the user's own cell
        if last is not None:
            value = eval(self.shell.compile(last, filename, "eval"), ns)  # noqa: S307 - the user's own cell
            if value is not None:
                display(value)
