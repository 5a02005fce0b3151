"""``%%geprof``: profile a notebook cell on the simulated GE runtime.

The magic turns its flags (over the defaults ``%geprof config`` set, see
:mod:`.config`) into profilingOptions, compiles the cell (a syntax error opens
no run), runs it under one profiling run (:func:`geprof_nb.collect.collect`,
shared with ``geprof run``), and shows the result.

* A *step schedule* (``--skip-first/--wait/--warmup/--active/--repeat``,
  ``torch.profiler.schedule`` semantics, :mod:`geprof_nb.prof.step_schedule`)
  decides per step (``run_graph``, ``run_graph_async``, ``aclmdlExecute``)
  whether msprof collects, through the same Start/Stop control path as the C
  API.  Without one every step of the cell is collected.
* A progress line (:mod:`.progress`) shows steps, how far the simulated device
  timeline got and the records reported to msprof while a long cell runs; its
  final line has the run's step figure.
* If the cell raises or is interrupted (Ctrl-C), what was collected is still
  finalised and shown, then the error propagates with the user's traceback.
  Ctrl-C during a step takes effect when the step is over, so the run never
  holds half a step.
"""

from __future__ import annotations

import ast
import contextlib
import sys
import types
from dataclasses import dataclass
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, line_magic, magics_class
from IPython.core.magic_arguments import kwds, magic_arguments
from IPython.display import display

from .. import ge
from ..analysis import ClusterProfile, Profile
from ..collect import AlreadyCollecting, OutputUnusable, check_not_collecting, collect, load_collected
from ..prof.clock import clock
from ..prof.options import ProfilingOptionsError
from . import commands
from . import display as nb_display
from . import progress as nb_progress
from .config import ConfigStore, HelpFormatter, cell_flags, cell_settings, help_with_defaults, parse_flags

CELL_EPILOG = """
Defaults: %geprof config (the options panel) sets the defaults of every flag
above; a flag on the cell overrides them for that cell.  Without a step
schedule every step of the cell is collected.  The built-in defaults are GE's,
except --training-trace on (GE: off: the step timeline is what a notebook is
for) and --output geprof_output (GE: ./).  A bad value is refused, naming the
flag and the values it accepts.

GE's l2 field (aclgrphProf's kProfL2cache) has no flag: GE options accept it,
but L2 cache sampling is not simulated (nothing is recorded, no l2_cache.csv,
and the run's notes say so); for L2 hit and miss counts per op use
--aic-metrics L2Cache on an A2-class chip.

Step schedule (torch.profiler.schedule semantics; a step is one run_graph,
run_graph_async or aclmdlExecute call, counted from 0 in the cell): the first
--skip-first steps are not profiled, then cycles of --wait steps off, --warmup
steps collected and discarded, --active steps recorded; --repeat cycles
(0: until the cell ends).  The Profile holds exactly the recorded steps; its
notes say which steps they were.

While the cell runs, a progress line shows steps, how far the simulated device
timeline got and the records reported to msprof; its final line has the step
figure ("step X ms = Computing a% / exposed Communication b% / Free c%").
Ctrl-C stops the cell at the end of the current step: the data collected so
far is finalised, shown and bound, then KeyboardInterrupt is raised.  The Profile is bound to
_geprof (and to NAME with -o).

Examples:

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
  %%geprof --fp-point dense_1/MatMulV2 --bp-point gradients/dense_1/Relu_grad/ReluGrad   # own FP/BP (mlp)
  %%geprof --device Ascend910A --clock virtual -o run_a --no-display
  %%geprof --output ./prof --runtime-api on --msproftx on --aicpu on
"""

LINE_DOC = """Work with geprof: %geprof COMMAND [...] (%geprof help prints every command's options).

Commands, with an example each:

  %geprof config                     # the options panel: defaults of later %%geprof cells
  %geprof config --aic-metrics Memory --active 3   # set some defaults without the panel
  %geprof config --reset             # back to the built-in defaults
  %geprof show run1                  # show a Profile's report (default: _geprof)
  %geprof load ./geprof_output -o latest   # a run, an output dir, real msprof / torch_npu output
  %geprof export run1 --format ascend_pt --to ./for_msprof_analyze   # msprof|ascend_pt|chrome|parquet
  %geprof compare run1 run2          # how run2 differs from run1, side by side (variables or paths)
  %geprof compare run1 --steps 2 7   # step 7 of run1 against its step 2
  %geprof advise run1                # findings ranked High/Medium/Low with evidence
  %geprof whatif run1 --speedup 'MatMul*=2' --remove 'Dropout*' --verify   # each step predicted, re-simulated
  %geprof help                       # this list, and the %%geprof flags

Names are Profile variables of the notebook or paths to load; show, advise, export and
whatif also take a ClusterProfile (%%geprof --ranks N), compare takes one rank.  %%geprof?
explains the cell magic's flags (every profilingOptions field, the simulation
settings and the step schedule) with examples.
"""


class CellSyntaxError(Exception):
    """The cell does not compile; shown exactly as IPython shows a SyntaxError in a plain cell.

    A SyntaxError raised from a magic is shown by IPython with every frame above it (the
    magic's); this error renders as the syntax error alone (``Cell In[N], line L``, the
    line, the caret, the message) and keeps it as :attr:`error`.
    """

    def __init__(self, error: SyntaxError, shell: Any) -> None:
        super().__init__(str(error))
        self.error = error
        self._shell = shell

    def _render_traceback_(self) -> list[str]:  # IPython's hook for how an exception is shown
        return self._shell.SyntaxTB.structured_traceback(type(self.error), self.error, [])


@dataclass
class _CompiledCell:
    """A cell compiled as IPython compiles one: its file name (``Cell In[N]``), body and last expression."""

    filename: str
    body: types.CodeType
    last: types.CodeType | None


@magics_class
class GeprofMagics(Magics):
    """The ``%%geprof`` cell magic and the ``%geprof`` line magic."""

    def __init__(self, shell: Any) -> None:
        super().__init__(shell)
        self.last_profile: Profile | ClusterProfile | None = None
        #: Defaults of later cells (``%geprof config``); one store per loaded extension.
        self.cell_defaults = ConfigStore()
        self.cell_defaults.add_listener(self._help_follows_the_defaults)
        self._help_follows_the_defaults("values")

    def _help_follows_the_defaults(self, event: str) -> None:
        """``%%geprof?`` and ``%geprof help`` say the defaults in force: the help is written again when
        ``%geprof config`` or the panel changes them (the docstring is the class's: the last extension
        loaded, the one whose ``%%geprof`` IPython runs, writes it)."""
        if event == "values":
            GeprofMagics.geprof.__doc__ = help_with_defaults(GeprofMagics.geprof.parser, self.cell_defaults.values)

    @magic_arguments()
    @kwds(epilog=CELL_EPILOG, formatter_class=HelpFormatter)
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
        if args.name is not None:
            commands.check_bind_name(args.name)
        settings = cell_settings(args, self.cell_defaults)
        compiled = self._compile_cell(cell)  # a syntax error opens no run
        try:
            check_not_collecting()
        except AlreadyCollecting as exc:
            raise UsageError(str(exc)) from None
        stack = contextlib.ExitStack()
        try:
            stack.enter_context(ge.simulation_settings(**settings.simulation()))
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        with stack:
            mode = "off" if args.no_display else nb_progress.frontend_mode(self.shell)
            schedule = settings.schedule
            info = {"line": settings.line, "executor": settings.values["executor"] or None, "clock": clock.mode,
                    "device": settings.values["device"] or None}
            try:
                collected = collect(lambda: self._run_cell(compiled), settings.options, schedule,
                                    code_filename=compiled.filename, info=info, guard=nb_progress.InterruptGuard(),
                                    make_progress=lambda: nb_progress.Progress(
                                        mode, total=schedule.total_steps if schedule else None))
            except AlreadyCollecting as exc:  # another thread opened a run since the check above
                raise UsageError(str(exc)) from None
            except OutputUnusable as exc:  # before the cell runs: a usage error naming the flag, not a traceback
                raise UsageError(f"--output {exc.output}: cannot be used ({exc.reason}); accepted: a directory that "
                                 "can be created and written") from None
            except ProfilingOptionsError as exc:  # the device GE runs on lacks the counter group
                raise UsageError(f"--{exc.field.replace('_', '-')}: {exc}") from None
        profile, said = load_collected(collected)
        self.last_profile = profile
        self.shell.user_ns["_geprof"] = profile
        if args.name:
            self.shell.user_ns[args.name] = profile
        self.cell_defaults.cell_ran()
        if said:
            print(said, file=sys.stderr)
        if not args.no_display and profile is not None:
            nb_display.show_profile(profile)
        if collected.error is not None:
            raise collected.error

    # The usage line of %%geprof? reads "%%geprof" (IPython's formatter prefixes one "%" to the prog).
    geprof.parser.prog = "%geprof"
    # No prefix matching: --aic-metric is refused with "did you mean --aic-metrics?", as --aic-metircs is
    geprof.parser.allow_abbrev = False

    @line_magic("geprof")
    def geprof_line(self, line: str) -> Any:
        __tracebackhide__ = True  # noqa: F841
        return commands.run(self.shell, line, self.geprof.__doc__ or "", config=self.cell_defaults)

    geprof_line.__doc__ = LINE_DOC

    def _compile_cell(self, cell: str) -> _CompiledCell:
        """Compile the cell as IPython compiles a plain one (``Cell In[N]`` with this cell's number);
        :class:`CellSyntaxError` if it does not compile."""
        code = self.shell.transform_cell(cell)
        filename = self.shell.compile.cache(code, self._cell_number(), raw_code=cell)
        try:
            tree = self.shell.transform_ast(self.shell.compile.ast_parse(code, filename=filename))
            last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
            body = self.shell.compile(tree, filename, "exec")  # first: it may import from __future__
            value = None if last is None else self.shell.compile(ast.Expression(last.value), filename, "eval")
        except SyntaxError as exc:  # IndentationError too
            raise CellSyntaxError(exc, self.shell) from None
        return _CompiledCell(filename, body, value)

    def _cell_number(self) -> int:
        """The execution count of the cell being run: the N of its ``In[N]``."""
        running = self.shell.displayhook.exec_result  # the result of the cell run_cell is running, if any
        return running.execution_count if running is not None else self.shell.displayhook.prompt_count

    def _run_cell(self, cell: _CompiledCell) -> None:
        """Run the cell in the user namespace like IPython would; show the last expression's value."""
        ns = self.shell.user_ns
        exec(cell.body, ns)  # noqa: S102 - the user's own cell
        if cell.last is not None:
            value = eval(cell.last, ns)  # noqa: S307 - the user's own cell
            if value is not None:
                display(value)
