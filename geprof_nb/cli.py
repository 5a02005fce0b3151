"""``geprof``: the terminal entry point (``geprof demo``, ``geprof analyze PATH``, ``geprof export PATH``)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pandas as pd

from . import ge
from .analysis import Profile, load
from .analysis.export import FORMATS
from .prof.options import ProfilingOptions, ProfilingOptionsError

MODELS = {
    "resnet50": lambda a: ge.models.resnet50(batch_size=a.batch_size, training=True, world_size=a.world_size),
    "bert": lambda a: ge.models.bert(batch_size=a.batch_size, training=True, world_size=a.world_size),
    "mlp": lambda a: ge.models.mlp(batch_size=a.batch_size, training=True, world_size=a.world_size),
}
#: op_summary columns that fit a terminal.
COMPACT_OP_COLUMNS = ["Op Name", "OP Type", "Task Type", "Task Duration(us)", "Block Num"]
COMPACT_STEP_COLUMNS = ["Iteration ID", "Iteration Time(us)", "FP to BP Time(us)", "Iteration Refresh(us)",
                        "Data Aug Bound(us)"]


def _print_tables(profile: Profile, top: int, out=sys.stdout) -> None:
    with pd.option_context("display.width", 200, "display.max_colwidth", 60):
        ops = profile.ops().sort_values("Task Duration(us)", ascending=False).head(top)
        extra = [c for c in ("aic_mac_ratio", "aiv_vec_ratio", "mac_ratio", "vec_ratio") if c in ops.columns]
        print(f"\nTop {len(ops)} ops of the last iteration by Task Duration(us):", file=out)
        print(ops[COMPACT_OP_COLUMNS + extra].to_string(index=False, na_rep="N/A", float_format="%.3f"), file=out)
        print("\nop_statistic (top 10 op types):", file=out)
        print(profile.op_statistic.head(10).to_string(index=False, float_format="%.3f"), file=out)
        st = profile.step_trace
        if len(st):
            print("\nstep_trace (us):", file=out)
            print(st[COMPACT_STEP_COLUMNS].to_string(index=False, na_rep="N/A", float_format="%.3f"), file=out)


def _write_timeline(profile: Profile) -> Path | None:
    from .nb import plots

    if not len(profile.step_trace):
        return None
    png = profile.path / "step_timeline.png"
    png.write_bytes(plots.figure_png(plots.step_timeline(profile.step_trace)))
    return png


def demo(args: argparse.Namespace) -> int:
    """Profile a zoo model's training on the virtual clock and show where time goes."""
    opts = ProfilingOptions(output=str(args.output), training_trace="on", task_trace="on",
                            aic_metrics="PipeUtilization")
    status = ge.GEInitialize({
        "ge.exec.profilingMode": "1", "ge.exec.profilingOptions": opts.to_json(),
        "geprof.clock": "virtual", "geprof.device": args.device,
    })
    if status != ge.SUCCESS:
        print(f"GEInitialize failed: {ge.GEGetErrorMsg()}", file=sys.stderr)
        return 1
    try:
        sess = ge.Session()
        graph = MODELS[args.model](args)
        sess.add_graph(1, graph)
        print(f"Profiling {graph.name} training (batch {args.batch_size}, world size {args.world_size}) "
              f"for {args.steps} steps on a simulated {args.device}, virtual clock ...")
        for _ in range(args.steps):
            if sess.run_graph(1) != ge.SUCCESS:
                print(f"RunGraph failed: {ge.GEGetErrorMsg()}", file=sys.stderr)
                return 1
    finally:
        ge.GEFinalize()
    profile = load(args.output)
    _print_tables(profile, args.top)
    png = _write_timeline(profile)
    print(f"\nRun directory: {profile.path}")
    if png is not None:
        print(f"Step timeline: {png}")
    print(f"Open it in Python: geprof_nb.load({str(profile.path)!r})")
    return 0


def analyze(args: argparse.Namespace) -> int:
    """Print the tables of an existing run (or the newest run in an output directory)."""
    profile = load(args.path)
    print(profile)
    _print_tables(profile, args.top)
    if args.json:
        print(json.dumps({"run": str(profile.path), "iterations": len(profile.step_trace),
                          "op_tasks": len(profile.op_summary)}))
    return 0


def export(args: argparse.Namespace) -> int:
    """Write a run (anything ``geprof_nb.load`` opens) in a real tool's format and list the files."""
    options = {"rank": args.rank} if args.format == "ascend_pt" else {}
    written = load(args.path).export(args.to, format=args.format, **options)
    files = sorted(p for p in written.rglob("*") if p.is_file()) if written.is_dir() else [written]
    print(f"Wrote {written}")
    for f in files:
        print(f"  {f.relative_to(written) if written.is_dir() else f.name}  ({f.stat().st_size} bytes)")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="geprof", description="GE profiling on a simulated Ascend runtime")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("demo", help="profile a zoo model and show the results")
    p.add_argument("--model", choices=sorted(MODELS), default="resnet50")
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--world-size", type=int, default=8)
    p.add_argument("--device", choices=sorted(ge.DEVICE_PRESETS), default="Ascend910B")
    p.add_argument("--output", type=Path, default=Path("geprof_output"))
    p.add_argument("--top", type=int, default=10, help="ops to list")
    p.set_defaults(func=demo)
    p = sub.add_parser("analyze", help="print the tables of a run directory")
    p.add_argument("path", type=Path)
    p.add_argument("--top", type=int, default=10)
    p.add_argument("--json", action="store_true", help="also print a JSON summary line")
    p.set_defaults(func=analyze)
    p = sub.add_parser("export", help="write a run as msprof, ascend_pt (msprof-analyze), chrome or parquet files")
    p.add_argument("path", type=Path, help="a run directory, an output directory (newest run) or real tool output")
    p.add_argument("--format", required=True, choices=FORMATS)
    p.add_argument("--to", type=Path, required=True, help="directory to write into (chrome: also a .json file)")
    p.add_argument("--rank", type=int, default=0, help="ascend_pt: the rank this run is exported as")
    p.set_defaults(func=export)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (FileNotFoundError, ValueError, ProfilingOptionsError) as exc:
        print(f"geprof: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
