"""The benchmark suite: ``python benchmarks/run.py [--quick] [--json OUT] [-k NAME]``.

Prints a table and optionally writes one JSON record per benchmark (name,
figure, unit, target, passed, detail: sizes, both sides' medians and the ratio
for comparisons, every run's time).  Figures are medians of at least five runs
after a warm-up; comparisons run both sides alternately in one process.
``--quick`` uses smaller sizes where a full run takes long (each benchmark's
name says its size; ratio benchmarks keep their meaning) and finishes in under
two minutes on two cores.  Not part of the test suite: CI runs ``--quick`` and
fails only if a benchmark crashes.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import advisor_accuracy  # noqa: E402
import bench_analysis  # noqa: E402
import bench_cluster  # noqa: E402
import bench_collection  # noqa: E402
import bench_exports  # noqa: E402
import bench_layers  # noqa: E402
import bench_llm  # noqa: E402
import bench_notebook  # noqa: E402
import bench_peers  # noqa: E402
import bench_plots  # noqa: E402
import bench_timeline  # noqa: E402
import bench_timing  # noqa: E402
from harness import Result, has_target, markdown, table  # noqa: E402

#: bench_llm before bench_cluster: the cross-rank tables read the llama2-70b step bench_llm times.
SUITES = [bench_layers, bench_collection, bench_peers, bench_analysis, bench_exports, bench_plots, bench_notebook,
          bench_llm, bench_cluster, bench_timeline, bench_timing, advisor_accuracy]


def machine() -> dict:
    """What the figures were measured on."""
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        model = platform.processor()
    return {"cpu": model, "cores": os.cpu_count(), "python": platform.python_version(),
            "platform": platform.platform()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes (under 2 minutes on 2 cores)")
    parser.add_argument("--json", type=Path, help="write the results here")
    parser.add_argument("--markdown", action="store_true", help="also print the table as Markdown")
    parser.add_argument("-k", default="", help="only benchmarks whose function name contains this")
    parser.add_argument("--in-process", action="store_true",
                        help="run the benchmarks marked isolated in this process too (what their own process runs)")
    args = parser.parse_args(argv)
    results = []
    began = time.perf_counter()
    for suite in SUITES:
        for bench in suite.BENCHMARKS:
            if args.k and args.k not in bench.__name__:
                continue
            t = time.perf_counter()
            if getattr(bench, "isolated", False) and not args.in_process:
                result = _in_own_process(bench.__name__, args.quick)
            else:
                result = bench(args.quick)
            result.detail["benchmark_s"] = round(time.perf_counter() - t, 2)
            print(f"{result.name}: {result.figure:.4g} {result.unit} (target {result.target}) "
                  f"[{result.detail['benchmark_s']} s]", flush=True)
            results.append(result)
    total = time.perf_counter() - began
    print()
    print(table(results))
    targeted = [r for r in results if has_target(r)]
    print(f"\n{sum(r.passed is True for r in targeted)}/{len(targeted)} targets met in {total:.0f} s "
          f"({'quick' if args.quick else 'full'} run); {machine()}")
    if args.markdown:
        print()
        print(markdown(results))
    if args.json:
        args.json.write_text(json.dumps({"quick": args.quick, "machine": machine(), "seconds": round(total, 1),
                                         "results": [r.as_dict() for r in results]}, indent=1))
    return 0


def _in_own_process(name: str, quick: bool) -> Result:
    """Run the one benchmark called ``name`` in a new Python process and take its result."""
    with tempfile.TemporaryDirectory(prefix="geprof_bench_") as tmp:
        out = Path(tmp) / "result.json"
        cmd = [sys.executable, __file__, "-k", name, "--in-process", "--json", str(out)]
        cmd += ["--quick"] if quick else []
        done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if done.returncode != 0:
            sys.stdout.write(done.stdout)
            raise RuntimeError(f"benchmark {name} failed in its own process (exit {done.returncode})")
        (record,) = json.loads(out.read_text())["results"]  # -k names one benchmark
    figure = float("nan") if record["figure"] is None else record["figure"]
    return Result(record["name"], figure, record["unit"], record["target"], record["passed"], record["detail"])


if __name__ == "__main__":
    sys.exit(main())
