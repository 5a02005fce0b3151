"""``geprof``: the terminal entry point (``geprof demo``, ``geprof run SCRIPT``, ``geprof analyze PATH``,
``geprof export PATH``)."""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import logging
import runpy
import sys
import traceback
import warnings
from pathlib import Path
from typing import Any, Callable, Iterator

import pandas as pd

from . import ge
from .analysis import ClusterProfile, Profile, load
from .analysis.export import FORMATS, RANK_DEFAULTS, write_failure
from .analysis.export.ascend_pt import rank_argument
from .analysis.export.cluster import FORMATS as CLUSTER_FORMATS
from .analysis.tables.step_split import PART_LABELS
from .collect import (
    COLLECTION_DEFAULTS,
    DEVICE_METAVAR,
    PROFILING_FLAGS,
    Collected,
    OutputUnusable,
    collect,
    device_flag_type,
    load_collected,
)
from .ge.device import DEFAULT_DEVICE, check_aic_metrics, get_device
from .ge.session import DEFAULT_EXECUTOR, EXECUTORS
from .prof.clock import CLOCK_MODES
from .prof.options import ProfilingOptions, ProfilingOptionsError, validate_field

MODELS = {
    "resnet50": lambda a: ge.models.resnet50(batch_size=a.batch_size, training=True, world_size=a.world_size),
    "bert": lambda a: ge.models.bert(batch_size=a.batch_size, training=True, world_size=a.world_size),
    "mlp": lambda a: ge.models.mlp(batch_size=a.batch_size, training=True, world_size=a.world_size),
}
#: op_summary columns that fit a terminal.
COMPACT_OP_COLUMNS = ["Op Name", "OP Type", "Task Type", "Task Duration(us)", "Block Num"]
COMPACT_STEP_COLUMNS = ["Iteration ID", "Iteration Time(us)", "FP to BP Time(us)", "Iteration Refresh(us)",
                        "Data Aug Bound(us)"]
#: step_breakdown columns that fit a terminal (a torch_npu file may lack all but Step, Computing,
#: Communication(Not Overlapped) and Free).
COMPACT_BREAKDOWN_COLUMNS = ["Step", "Computing", "Communication(Not Overlapped)", "Overlapped", "Communication",
                             "Free"]
#: The JSON keys of the step split's parts (Computing, Communication(Not Overlapped), Free).
SPLIT_KEYS = ("computing", "exposed_communication", "free")
#: slow_ranks columns that fit a terminal.
COMPACT_RANK_COLUMNS = ["Rank", "Step Time(us)", "Own Time(us)", "Computing(us)", "Communication(Not Overlapped)(us)",
                        "Free(us)", "Wait Time(us)", "Bound", "Slow"]
#: What ``analyze`` and ``export`` open.
PATH_HELP = "a run directory, an output directory (newest run), a cluster root (CLUSTER_*) or real tool output"


def _positive_int(value: str) -> int:
    """An argparse ``type``: a positive integer."""
    accepted = "a positive integer (1, 2, 3, ...)"
    try:
        n = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a whole number; accepted: {accepted}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"{n} is not valid; accepted: {accepted}")
    return n


def _profiling_field(field: str):
    """An argparse ``type`` that checks a flag's value as GE checks the profilingOptions field."""

    def convert(value: str) -> str:
        try:
            return validate_field(field, value)
        except ProfilingOptionsError as exc:
            raise argparse.ArgumentTypeError(f"{value!r} is not valid; accepted: {exc.accepted}") from None

    return convert


def _script(value: str) -> Path:
    path = Path(value)
    if not path.is_file():
        raise argparse.ArgumentTypeError(f"{value}: no such file; accepted: a Python script file")
    return path


def _print_tables(profile: Profile, top: int, notes: list[str]) -> None:
    """Print the step figure (what the explorer's headline leads with) and its parts, the top ops, the top op
    types of op_statistic, the step table and the findings, then ``notes``, which say why a table is empty or
    what to keep in mind when reading it; a table without rows is one line saying so."""
    split = profile.step_split
    if split is not None:
        other = ("; step_trace's Iteration Time below is an iteration's own span, without the gap before it"
                 if len(profile.step_trace) else "")
        print(f"\n{split.headline()} ({split.basis()}{other})")
        print("  per step: " + ", ".join(f"{label} {us:,.3f} us" for label, us in zip(PART_LABELS, split.parts_us)))
    no_step = "no step ran while profiling collected" if profile.no_step_ran else None
    no_task_data = no_step or ("task_trace off" if profile.options.get("task_trace") == "off" else None)
    with pd.option_context("display.width", 200, "display.max_colwidth", 60):
        ops = _top_ops(profile, top)
        _print_table(f"Top {len(ops) or top} ops of the last iteration by Task Duration(us)", ops,
                     _no_rows("no op data", notes, no_task_data))
        _print_table(f"op_statistic (top {top} op types)", profile.op_statistic.head(top),
                     _no_rows("no op types" if len(ops) else "no op data", notes, no_task_data))
        _print_table(*_step_table(profile), _no_rows("no step data", notes, no_step))
    findings = profile.advise()
    if len(findings):
        print(f"\nFindings (top {min(top, len(findings))} of {len(findings)}, highest priority first):")
        for f in findings.head(top).itertuples():
            print(f"  [{f.Priority}] {f.Rule}: {f.Finding}")
    else:
        print(f"\nFindings: none ({no_step or 'nothing crossed the advisor thresholds'})")
    if notes:
        print("\nNotes:")
        for note in notes:
            print(f"  - {note}")


def _top_ops(profile: Profile, top: int) -> pd.DataFrame:
    """The ``top`` longest op tasks of the last iteration, in the columns that fit a terminal."""
    ops = profile.ops().sort_values("Task Duration(us)", ascending=False).head(top)
    extra = [c for c in ("aic_mac_ratio", "aiv_vec_ratio", "mac_ratio", "vec_ratio") if c in ops.columns]
    return ops[COMPACT_OP_COLUMNS + extra]


def _title(run: Profile | ClusterProfile) -> str:
    """What a run is, in a line (a Profile's repr is for programmers)."""
    if isinstance(run, ClusterProfile):
        return f"Cluster {run.name}: {len(run.ranks)} ranks ({run.path})"
    state = " (INCOMPLETE: not finalised)" if not run.complete else ""
    return (f"Run {run.name}{state}: {len(run.op_summary):,} op tasks, {run.iteration_count} iterations "
            f"({run.path})")


def _records(table: pd.DataFrame) -> list[dict[str, Any]]:
    """A table as JSON records (missing values as null)."""
    return json.loads(table.to_json(orient="records", double_precision=15))


def _json_summary(run: Profile | ClusterProfile, profile: Profile, top: int) -> dict[str, Any]:
    """What ``analyze --json`` prints: the text's tables and findings as one JSON document."""
    split = profile.step_split
    doc: dict[str, Any] = {
        "run": str(run.path), "name": run.name, "complete": bool(profile.complete),
        "iterations": profile.iteration_count, "op_tasks": len(profile.op_summary),
        "step_split": None if split is None else {
            "headline": split.headline(), "basis": split.basis(), "step_us": split.length_us,
            **{f"{key}_us": us for key, us in zip(SPLIT_KEYS, split.parts_us)},
            **{f"{key}_percent": share for key, share in zip(SPLIT_KEYS, split.shares)}},
        "top_ops": _records(_top_ops(profile, top)),
        "op_statistic": _records(profile.op_statistic.head(top)),
        "steps": _records(_step_table(profile)[1]),
        "findings": _records(profile.advise().head(top)),
        "notes": _notes(run, profile),
    }
    if isinstance(run, ClusterProfile):
        ranks = run.slow_ranks
        doc.update(ranks=list(run.ranks), rank=min(run.ranks),
                   slow_ranks=[int(r) for r in ranks.loc[ranks["Slow"], "Rank"]],
                   rank_table=_records(ranks[COMPACT_RANK_COLUMNS].head(top)))
    return doc


def _print_table(title: str, table: pd.DataFrame, no_rows: str) -> None:
    """Print ``title`` and ``table``; a table without rows as one line, ``title: no_rows`` (not pandas'
    "Empty DataFrame" listing)."""
    if len(table):
        print(f"\n{title}:")
        print(table.to_string(index=False, na_rep="N/A", float_format="%.3f"))
    else:
        print(f"\n{title}: {no_rows}")


def _step_table(profile: Profile) -> tuple[str, pd.DataFrame]:
    """The title and compact columns of the run's per-step table: step_trace (raw runs, msprof output), or,
    when only it has rows, step_breakdown (an ascend_pt import has no step_trace)."""
    trace = profile.step_trace
    if not len(trace) and len(profile.step_breakdown):
        breakdown = profile.step_breakdown
        return "step_breakdown (us)", breakdown[[c for c in COMPACT_BREAKDOWN_COLUMNS if c in breakdown.columns]]
    return "step_trace (us)", trace[COMPACT_STEP_COLUMNS]


def _no_rows(what: str, notes: list[str], off: str | None = None) -> str:
    """What an empty table lacks and where the reason is: ``off`` (the option that turned it off), else the notes."""
    if off is not None:
        return f"{what} ({off})"
    return f"{what} (see the notes below)" if notes else what


def _notes(run: Profile | ClusterProfile, profile: Profile) -> list[str]:
    """The notes printed after the tables of ``profile``: a cluster's own, then those of its rank shown."""
    if not isinstance(run, ClusterProfile):
        return profile.notes
    rank = min(run.ranks)
    return [*run.notes, *(f"rank {rank}: {note}" for note in profile.notes)]


def _write_timeline(profile: Profile) -> Path | None:
    from .nb import plots

    if not len(profile.step_trace):
        return None
    png = profile.path / "step_timeline.png"
    figure = plots.step_timeline(profile.step_trace, forward_models=profile.forward_only_models)
    png.write_bytes(plots.figure_png(figure))
    return png


@contextlib.contextmanager
def _ge_log_reported_here() -> Iterator[None]:
    """GE's error log kept off stderr while a command that says GE's failure itself runs (the message would
    otherwise print twice: once by Python's last-resort log handler, once by the command).  Logging the user
    configured still gets every record."""
    log = logging.getLogger("geprof_nb.ge")
    quiet = logging.NullHandler()
    log.addHandler(quiet)
    try:
        yield
    finally:
        log.removeHandler(quiet)


def _demo_hint(message: str, args: argparse.Namespace) -> str:
    """What to change when the demo's model does not fit the simulated device."""
    if "of device memory" not in message:
        return ""
    return (f"\n  --model {args.model} at --batch-size {args.batch_size} does not fit {args.device}'s memory; "
            "a smaller --batch-size needs less")


def demo(args: argparse.Namespace) -> int:
    """Profile a zoo model's training on the virtual clock and show where time goes; the run is opened as
    ``geprof run`` opens one (its defaults, its refusal of an unusable ``--output``)."""
    options = ProfilingOptions.parse({**COLLECTION_DEFAULTS, "output": str(args.output)})
    failed: list[str] = []  # GE's message when a step fails

    def train() -> None:
        sess = ge.Session()
        graph = MODELS[args.model](args)
        sess.add_graph(1, graph)
        print(f"Profiling {graph.name} training (batch {args.batch_size}, world size {args.world_size}) "
              f"for {args.steps} steps on a simulated {args.device}, virtual clock ...")
        for _ in range(args.steps):
            if sess.run_graph(1) != ge.SUCCESS:
                failed.append(ge.GEGetErrorMsg())
                return

    with ge.simulation_settings(clock_mode="virtual", device=args.device), _ge_log_reported_here():
        collected = _collect("demo", train, options, subject="demo",
                             info={"model": args.model, "batch_size": args.batch_size, "world_size": args.world_size})
    if collected is None:
        return 2
    if failed:
        print(f"geprof demo: RunGraph failed: {failed[0]}{_demo_hint(failed[0], args)}", file=sys.stderr)
        return 1
    return _show_collected(collected, args.top)


def _collect(command: str, code: Callable[[], None], options: ProfilingOptions, **kwargs: Any) -> Collected | None:
    """:func:`collect` ``code`` for ``geprof run`` / ``demo``; ``None``, said on stderr naming ``--output``, when
    no run can be opened there (nothing ran)."""
    try:
        return collect(code, options, info_key="cli", **kwargs)
    except OutputUnusable as exc:
        print(f"geprof {command}: --output {exc.output}: cannot be used ({exc.reason}); accepted: a directory that can "
              "be created and written", file=sys.stderr)
        return None


def _show_collected(collected: Collected, top: int) -> int:
    """Show a finalised run (:func:`_show_run`) and return the exit status for what its code raised (1 for code
    that succeeded when not everything could be written into the run directory: stderr said what)."""
    profile, said = load_collected(collected)
    if said:
        print(said, file=sys.stderr)
    if profile is None:  # the run directory went away: nothing to show
        return _exit_status(collected.error) or 1
    _show_run(profile, top)
    return _exit_status(collected.error) or (1 if collected.write_problem else 0)


def _show_run(run: Profile | ClusterProfile, top: int) -> None:
    """Print a run's tables (a cluster: rank 0's), write its step timeline PNG and say where it is."""
    profile = run.rank(min(run.ranks)) if isinstance(run, ClusterProfile) else run
    if isinstance(run, ClusterProfile):
        print(f"{_title(run)}; the tables of rank {min(run.ranks)}:")
    _print_tables(profile, top, _notes(run, profile))
    png = _write_timeline(profile)
    print(f"\nRun directory: {run.path}")
    if png is not None:
        print(f"Step timeline: {png}")
    print(f"Open it in Python: geprof_nb.load({str(run.path)!r})")


def run(args: argparse.Namespace) -> int:
    """Run a Python script as ``__main__`` under one profiling run, as a ``%%geprof`` cell runs, and print
    its tables.  The run is finalised even if the script raises; then the exit status is not 0."""
    values = dict(COLLECTION_DEFAULTS)
    values.update({field: getattr(args, field) for _, field, _, _ in PROFILING_FLAGS
                   if getattr(args, field) is not None})
    options = ProfilingOptions.parse(values)
    if args.device is not None:  # as %%geprof checks it: before the run opens, naming both flags
        try:
            check_aic_metrics(get_device(args.device), options.aic_metrics)
        except ProfilingOptionsError as exc:
            print(f"geprof run: --aic-metrics {options.aic_metrics}: not available on --device {args.device}; "
                  f"accepted there: {exc.accepted}", file=sys.stderr)
            return 2
    script = str(args.script)
    saved_argv, saved_path = sys.argv, list(sys.path)
    sys.argv = [script, *args.script_args]
    sys.path.insert(0, str(args.script.resolve().parent))  # as `python SCRIPT` does
    try:
        with ge.simulation_settings(executor=args.executor, clock_mode=args.clock, device=args.device):
            collected = _collect("run", lambda: runpy.run_path(script, run_name="__main__"), options,
                                 code_filename=script, subject="script",
                                 info={"script": script, "argv": list(args.script_args)})
    finally:
        sys.argv, sys.path[:] = saved_argv, saved_path
    if collected is None:
        return 2
    return _show_collected(collected, args.top)


def _exit_status(error: BaseException | None) -> int:
    """The exit status of ``geprof run`` for what the script raised: 0, its SystemExit code, else 1
    (with the script's traceback on stderr, as Python prints it)."""
    if error is None:
        return 0
    if isinstance(error, SystemExit):
        if error.code is None or isinstance(error.code, int):
            return error.code or 0
        print(error.code, file=sys.stderr)
        return 1
    traceback.print_exception(error, file=sys.stderr)
    return 1


def analyze(args: argparse.Namespace) -> int:
    """Print the tables and findings of an existing run (or the newest run in an output directory); of a
    cluster, its ranks slowest first, then the tables of its lowest rank.  ``--json``: the same as one JSON
    document, and nothing else on stdout."""
    run = load(args.path)
    cluster = isinstance(run, ClusterProfile)
    profile = run.rank(min(run.ranks)) if cluster else run
    if args.json:
        print(json.dumps(_json_summary(run, profile, args.top), indent=2))
        return 0
    print(_title(run))
    if cluster:
        ranks = run.slow_ranks
        with pd.option_context("display.width", 200):
            print(f"\nRanks, slowest (own time: Computing + Free) first (us per step, top {min(args.top, len(ranks))} "
                  f"of {len(ranks)}):")
            print(ranks[COMPACT_RANK_COLUMNS].head(args.top).to_string(index=False, float_format="%.3f"))
        print(f"\nThe tables of rank {min(run.ranks)}:")
    _print_tables(profile, args.top, _notes(run, profile))
    return 0


def export(args: argparse.Namespace) -> int:
    """Write a run (anything ``geprof_nb.load`` opens) in a real tool's format and list the files; a
    cluster in the formats that keep its ranks, every rank as its own."""
    if args.rank is not None and args.format not in RANK_DEFAULTS:
        args.usage_error(f"argument --rank: --format {args.format} has no rank; accepted: --rank with --format "
                         f"{' or '.join(RANK_DEFAULTS)}")
    run = load(args.path)
    if isinstance(run, ClusterProfile):
        if args.format not in CLUSTER_FORMATS:
            print(f"geprof export: --format {args.format}: {args.path} is a cluster (ranks {list(run.ranks)}); "
                  f"accepted for a cluster: {', '.join(CLUSTER_FORMATS)} (for {args.format}, export one rank's "
                  "run directory)", file=sys.stderr)
            return 2
        if args.rank is not None:
            print(f"geprof export: --rank {args.rank}: {args.path} is a cluster, whose ranks are exported as their "
                  "own ranks; accepted: --rank for one run only", file=sys.stderr)
            return 2
        options = {}
    else:
        rank = args.rank if args.rank is not None else RANK_DEFAULTS.get(args.format)
        options = {"rank": rank} if args.format in RANK_DEFAULTS and rank is not None else {}
    try:
        written = run.export(args.to, format=args.format, **options)
    except OSError as exc:
        print(f"geprof export: {write_failure(exc, args.format, args.to)}", file=sys.stderr)
        return 1
    files = sorted(p for p in written.rglob("*") if p.is_file()) if written.is_dir() else [written]
    print(f"Wrote {written}")
    for f in files:
        print(f"  {f.relative_to(written) if written.is_dir() else f.name}  ({f.stat().st_size} bytes)")
    return 0


def build_parser() -> argparse.ArgumentParser:
    # allow_abbrev=False: a flag is named in full (argparse would run --aic-metric as --aic-metrics)
    parser = argparse.ArgumentParser(prog="geprof", description="GE profiling on a simulated Ascend runtime",
                                     allow_abbrev=False)
    sub = parser.add_subparsers(dest="command", required=True,
                                parser_class=functools.partial(argparse.ArgumentParser, allow_abbrev=False))
    p = sub.add_parser("demo", help="profile a zoo model and show the results")
    p.add_argument("--model", choices=sorted(MODELS), default="resnet50", help="zoo model to train (default: resnet50)")
    p.add_argument("--steps", type=_positive_int, default=10, metavar="N", help="steps to run (default: 10)")
    p.add_argument("--batch-size", type=_positive_int, default=32, metavar="N", help="samples per step (default: 32)")
    p.add_argument("--world-size", type=_positive_int, default=8, metavar="N",
                   help="ranks the gradient AllReduce spans (default: 8)")
    p.add_argument("--device", choices=sorted(ge.DEVICE_PRESETS), default="Ascend910B",
                   help="simulated device (default: Ascend910B)")
    p.add_argument("--output", type=Path, default=Path("geprof_output"), metavar="DIR",
                   help="directory the run directory is made in (default: geprof_output)")
    p.add_argument("--top", type=_positive_int, default=10, metavar="N", help="ops to list (default: 10)")
    p.set_defaults(func=demo)
    p = sub.add_parser("run", help="run a Python script under profiling, as a %%%%geprof cell runs, and print its "
                       "tables", usage="geprof run [flags] SCRIPT [ARGS ...]",
                       description="Run SCRIPT as __main__ (sys.argv = [SCRIPT, ARGS ...]) under one profiling "
                       "run, as a %%geprof cell runs: every step it runs (run_graph, aclmdlExecute) is collected. "
                       "The run is finalised even if the script raises (then the exit status is not 0). geprof's "
                       "flags go before SCRIPT; everything after SCRIPT is the script's.")
    p.add_argument("script", type=_script, metavar="SCRIPT", help="the Python script to run")
    script_args = p.add_argument("script_args", nargs=argparse.REMAINDER, metavar="ARGS", help="the script's arguments")
    script_args.required = False  # argparse makes a REMAINDER positional required: `geprof run` would ask for ARGS
    for flag, field, metavar, help_text in PROFILING_FLAGS:
        p.add_argument(flag, dest=field, type=_profiling_field(field), default=None, metavar=metavar, help=help_text)
    p.add_argument("--executor", choices=sorted(EXECUTORS), default=None,
                   help=f"GE executor: v2 (RT2) or v1 (hybrid) (default: {DEFAULT_EXECUTOR})")
    p.add_argument("--clock", choices=list(CLOCK_MODES), default=None,
                   help="real: host time is your code's wall time between geprof calls plus GE's modelled costs; "
                   "virtual: modelled costs only, runs repeat exactly (default: real)")
    p.add_argument("--device", type=device_flag_type, default=None, metavar=DEVICE_METAVAR,
                   help=f"device preset of a GE the script initialises: {', '.join(ge.DEVICE_PRESETS)}, or a what-if "
                        f"such as Ascend910B:ai_core_num=20,hbm_bandwidth=1.2e12 (default: {DEFAULT_DEVICE})")
    p.add_argument("--top", type=_positive_int, default=10, metavar="N", help="ops to list (default: 10)")
    p.set_defaults(func=run)
    p = sub.add_parser("analyze", help="print the tables of a run directory or a cluster")
    p.add_argument("path", type=Path, metavar="PATH", help=PATH_HELP)
    p.add_argument("--top", type=_positive_int, default=10, metavar="N", help="ops to list (default: 10)")
    p.add_argument("--json", action="store_true",
                   help="print the same (step split, top ops, op_statistic, steps, findings, notes) as one JSON "
                        "document, and nothing else")
    p.set_defaults(func=analyze)
    p = sub.add_parser("export", help="write a run as msprof, ascend_pt (msprof-analyze), chrome or parquet files, "
                                      "or as torch_npu's (db) or msprof's (msprof_db) SQLite databases")
    p.add_argument("path", type=Path, metavar="PATH", help=PATH_HELP)
    p.add_argument("--format", required=True, choices=FORMATS, help="the format to write")
    p.add_argument("--to", type=Path, required=True, metavar="DIR",
                   help="directory to write into (chrome: also a .json file)")
    p.add_argument("--rank", type=rank_argument, default=None, metavar="N",
                   help="ascend_pt, db, msprof_db: the rank this run is exported as (default: 0; msprof_db: none; a "
                        "cluster's ranks keep theirs)")
    p.set_defaults(func=export, usage_error=p.error)  # for flag combinations argparse cannot check one by one
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    with warnings.catch_warnings():  # restores the warnings machinery on the way out
        warnings.showwarning = _geprof_warnings_as_lines(warnings.showwarning)
        try:
            return args.func(args)
        except (OSError, ValueError, ProfilingOptionsError) as exc:  # the documented errors: a line, no traceback
            print(f"geprof: {exc}", file=sys.stderr)
            return 2


def _geprof_warnings_as_lines(show: Callable[..., None]) -> Callable[..., None]:
    """geprof's own warnings as one ``geprof: warning: ...`` line each (their text is meant for the user,
    not the package's file and source line); a script's warnings are shown by ``show`` as usual."""
    package = str(Path(__file__).parent)

    def show_warning(message, category, filename, lineno, file=None, line=None) -> None:
        if str(filename).startswith(package):
            print(f"geprof: warning: {message}", file=file or sys.stderr)
        else:
            show(message, category, filename, lineno, file, line)

    return show_warning


if __name__ == "__main__":
    sys.exit(main())
