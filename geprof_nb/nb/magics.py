"""``%%geprof``: profile a notebook cell on the simulated GE runtime.

The magic turns its flags (over the defaults ``%geprof config`` set, see
:mod:`.config`) into profilingOptions, opens a run through the msprof
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

import ast
import contextlib
import os
import types
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, line_magic, magics_class
from IPython.core.magic_arguments import kwds, magic_arguments
from IPython.display import display

from .. import ge
from ..analysis import Profile, load
from ..ge.session import step_hooks
from ..prof import msprof
from ..prof.clock import clock
from ..prof.step_schedule import NONE, WARMUP, ScheduledCollection
from . import commands
from . import display as nb_display
from . import progress as nb_progress
from .config import CellSettings, ConfigStore, cell_flags, cell_settings, parse_flags

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

Names are Profile variables of the notebook or paths to load; show, advise and export
also take a ClusterProfile (``%%geprof --ranks N``), compare takes one rank.  ``%%geprof?``
explains the cell magic's flags (every profilingOptions field, the simulation
settings and the step schedule) with examples.
"""


def users_traceback(error: BaseException, cell_filename: str | None) -> BaseException:
    """``error`` with a traceback that starts at the cell's own code.

    The frames above it (``_profile_cell``, ``_run_cell``) are the magic's, not the
    user's: the person should see the traceback their cell would raise without
    ``%%geprof``.  A Ctrl-C that the step guard raises at the end of a step also loses
    the guard's frames (this package's ``nb/``) at its end.  An error raised before
    the cell's code ran keeps its whole traceback.
    """
    frames = []
    tb = error.__traceback__
    while tb is not None:
        frames.append(tb)
        tb = tb.tb_next
    start = next((i for i, t in enumerate(frames) if t.tb_frame.f_code.co_filename == cell_filename), None)
    if start is None:
        return error
    keep = frames[start:]
    if isinstance(error, KeyboardInterrupt):
        ours = os.path.dirname(os.path.abspath(__file__))
        while len(keep) > 1 and os.path.dirname(os.path.abspath(keep[-1].tb_frame.f_code.co_filename)) == ours:
            keep.pop()
    new = None
    for t in reversed(keep):
        new = types.TracebackType(new, t.tb_frame, t.tb_lasti, t.tb_lineno)
    return error.with_traceback(new)


@magics_class
class GeprofMagics(Magics):
    """The ``%%geprof`` cell magic and the ``%geprof`` line magic."""

    def __init__(self, shell: Any) -> None:
        super().__init__(shell)
        self.last_profile: Profile | None = None
        self._cell_filename: str | None = None  # the code object file name of the cell being run
        #: Defaults of later cells (``%geprof config``); one store per loaded extension.
        self.cell_defaults = ConfigStore()

    @magic_arguments()
    @kwds(epilog=CELL_EPILOG)
    @cell_flags
    @cell_magic
    def geprof(self, line: str, cell: str) -> None:
        """Profile the cell on the simulated GE runtime and show op and step tables.

        Every profilingOptions field that changes what is collected has a flag;
        values are checked like GE checks the JSON.  The Profile's tables include
        op_summary, op_statistic, step_trace, task_time, api_statistic,
        host_events, msprof_tx, communication_statistic, aicpu, operator_memory.
        """
        __tracebackhide__ = True  # noqa: F841 - IPython hides this frame in tracebacks
        args = parse_flags(self.geprof, line)
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
        self._cell_filename = None
        options = settings.options
        switch = options.data_type_config()
        schedule = settings.schedule
        try:
            msprof.lib.init(options.output, options.to_dict(), mode="magic")
        except OSError as exc:  # before the cell runs: a usage error naming the flag, not a traceback
            raise UsageError(f"--output {options.output}: cannot be used ({exc}); accepted: a directory that can "
                             "be created and written") from None
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
            error = users_traceback(exc, self._cell_filename)
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
        filename = self._cell_filename = self.shell.compile.cache(code)
        ns = self.shell.user_ns
        exec(self.shell.compile(tree, filename, "exec"), ns)  # noqa: S102 - the user's own cell
        if last is not None:
            value = eval(self.shell.compile(last, filename, "eval"), ns)  # noqa: S307 - the user's own cell
            if value is not None:
                display(value)
