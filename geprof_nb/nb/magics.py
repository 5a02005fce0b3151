"""``%%geprof``: profile a notebook cell on the simulated GE runtime.

The magic turns its flags into profilingOptions, opens a run through the
msprof library (which starts GE's collection through its control callback,
whether GE is already initialised or the cell initialises it), runs the cell,
finalises the run and shows the result.  If the cell raises or is
interrupted, what was collected is still finalised and shown, then the error
propagates with the user's traceback.
"""

from __future__ import annotations

import ast
import argparse
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, line_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring
from IPython.display import display

from .. import ge
from ..analysis import Profile, load
from ..prof import msprof
from ..prof.clock import CLOCK_MODES
from ..prof.events import AIC_METRICS
from ..prof.options import ProfilingOptions, ProfilingOptionsError, validate_field
from . import commands
from . import display as nb_display

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


def _profiling_flags(func):
    for flag, field, metavar, help_text in reversed(PROFILING_FLAGS):
        func = argument(flag, dest=field, type=_field_type(field), default=None, metavar=metavar, help=help_text)(func)
    return func


def options_from_args(args: argparse.Namespace, defaults: dict[str, str] | None = None) -> ProfilingOptions:
    """profilingOptions from parsed flags over ``defaults`` over :data:`MAGIC_DEFAULTS`."""
    values = dict(MAGIC_DEFAULTS)
    values.update(defaults or {})
    for _, field, _, _ in PROFILING_FLAGS:
        v = getattr(args, field, None)
        if v is not None:
            values[field] = v
    return ProfilingOptions.parse(values)


@magics_class
class GeprofMagics(Magics):
    """The ``%%geprof`` cell magic and the ``%geprof`` line magic."""

    def __init__(self, shell: Any) -> None:
        super().__init__(shell)
        self.last_profile: Profile | None = None

    @magic_arguments()
    @_profiling_flags
    @argument("--executor", choices=sorted(ge.session.EXECUTORS), default=None,
              help="GE executor: v2 (RT2) or v1 (hybrid); matters most for dynamic shapes (default: v2)")
    @argument("--clock", choices=list(CLOCK_MODES), default=None,
              help="real: host time is wall time; virtual: fixed host costs, runs repeat exactly")
    @argument("-o", dest="name", default=None, metavar="NAME",
              help="also bind the Profile to this variable (it is always bound to _geprof)")
    @argument("--no-display", action="store_true", help="collect and bind the Profile, show nothing")
    @cell_magic
    def geprof(self, line: str, cell: str) -> None:
        """Profile the cell on the simulated GE runtime and show op and step tables.

        Examples::

            %%geprof --aic-metrics PipeUtilization --training-trace on
            sess = ge.Session()
            sess.add_graph(1, ge.models.resnet50(batch_size=32, training=True, world_size=8))
            for step in range(10):
                sess.run_graph(1)

            %%geprof --clock virtual -o run1 --no-display
            for step in range(100):
                sess.run_graph(1)

        Every profilingOptions field that changes what is collected has a
        flag; values are checked like GE checks the JSON.  The Profile is
        bound to ``_geprof`` (and ``NAME`` with ``-o``); its tables include
        ``op_summary``, ``op_statistic``, ``step_trace``, ``task_time``,
        ``api_statistic``, ``host_events``, ``msprof_tx``,
        ``communication_statistic``, ``aicpu``, ``operator_memory``.
        """
        __tracebackhide__ = True  # noqa: F841 - IPython hides this frame in tracebacks
        args = parse_argstring(self.geprof, line)
        if args.name is not None and not args.name.isidentifier():
            raise UsageError(f"-o NAME must be a Python identifier, got {args.name!r}")
        try:
            options = options_from_args(args)
        except ProfilingOptionsError as exc:
            raise UsageError(str(exc)) from None
        if msprof.lib.running:
            raise UsageError(f"profiling is already collecting into {msprof.lib.run_dir}; finish that run first "
                             "(ge.GEFinalize() for GE options, aclgrphProfFinalize() for the C API)")
        error: BaseException | None = None
        with ge.simulation_settings(executor=args.executor, clock_mode=args.clock):
            msprof.lib.init(options.output, options.to_dict(), mode="magic")
            msprof.lib.start(options.data_type_config())
            try:
                self._run_cell(cell)
            except BaseException as exc:  # noqa: BLE001 - finalise and show, then re-raise below
                error = exc
            finally:
                note = "" if error is None else f"the profiled cell raised {type(error).__name__}: {error}"
                run_dir = msprof.lib.finalize(note=note)
        profile = load(run_dir)
        self.last_profile = profile
        self.shell.user_ns["_geprof"] = profile
        if args.name:
            self.shell.user_ns[args.name] = profile
        if not args.no_display:
            nb_display.show_profile(profile)
        if error is not None:
            raise error

    @line_magic("geprof")
    def geprof_line(self, line: str) -> Any:
        """Work with Profiles: ``%geprof show|load|export|compare|advise|help`` (``%geprof help`` for details).

        Examples::

            %geprof show run1
            %geprof load ./geprof_output -o latest
            %geprof export run1 --format ascend_pt --to ./for_msprof_analyze
            %geprof compare run1 run2
            %geprof advise
        """
        __tracebackhide__ = True  # noqa: F841
        return commands.run(self.shell, line, self.geprof.__doc__ or "")

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
