"""The benchmark suite: ``python benchmarks/run.py [--quick] [--json OUT]``.

Prints a table and optionally writes one JSON record per benchmark.  Figures
are medians of at least five runs after a warm-up; comparisons run both sides
alternately in one process.  Not part of the test suite; CI runs ``--quick``
and fails only if a benchmark crashes.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_layers  # noqa: E402
import bench_plots  # noqa: E402
from harness import table  # noqa: E402

SUITES = [bench_layers, bench_plots]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes (under 2 minutes on 2 cores)")
    parser.add_argument("--json", type=Path, help="write the results here")
    parser.add_argument("-k", default="", help="only benchmarks whose name contains this")
    args = parser.parse_args(argv)
    results = []
    for suite in SUITES:
        for bench in suite.BENCHMARKS:
            if args.k and args.k not in bench.__name__:
                continue
            result = bench(args.quick)
            print(f"{result.name}: {result.figure:.4g} {result.unit} (target {result.target})", flush=True)
            results.append(result)
    print()
    print(table(results))
    if args.json:
        args.json.write_text(json.dumps([r.as_dict() for r in results], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
