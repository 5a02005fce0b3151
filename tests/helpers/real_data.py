"""The real profiler output in ``tests/data`` (``SOURCES.md`` there) and a reader of it that uses the
csv and json modules only, so the importer tests compare geprof's tables with what the files hold,
not with geprof's own reading of them."""

from __future__ import annotations

import csv
import json
import math
import shutil
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

DATA = Path(__file__).resolve().parents[1] / "data"
PYTORCH_TEXT = DATA / "msinsight_pytorch_text"
LEVELS = ("level0", "level1", "level2")
#: Every torch_npu run of the 2-rank training (three profiler levels, two ranks).
RUNS = [PYTORCH_TEXT / level / f"rank{rank}_ascend_pt" for level in LEVELS for rank in (0, 1)]
#: torch_npu's DB output of the same training (Level2, two ranks), captured separately.
PYTORCH_DB = DATA / "msinsight_pytorch_db" / "level2"
DB_RUNS = [PYTORCH_DB / f"rank{rank}_ascend_pt" for rank in (0, 1)]
#: Two ranks in folders not named *_ascend_pt, a short row and spreadsheet numbers among them.
SERVER_RANKS = DATA / "msinsight_server_test_data"
#: A kernel_details.csv with 19 collectives and no step_trace_time.csv.
COMPUTE_ADVICE = DATA / "msprof_analyze_compute_advice"
#: An older CANN op_summary (no Device_id, Task Start Time, Block Dim, unprefixed PMU names).
OLDER_OP_SUMMARY = DATA / "mskpp_op_summary" / "op_summary_0_1.csv"
#: Where the workspace keeps the data set the issue names (absent on a fresh clone).
SHARED_REAL_DATA = [p / "shared" / "real-data" / "msinsight_pytorch_text" for p in DATA.parents]


#: Cells that hold no value.
NA = ("", "N/A")


def run_id(run: Path) -> str:
    return f"{run.parent.name}-{run.name.split('_')[0]}"


def ns(text: str) -> int:
    """Exact ns of a µs cell as written (``1736405443881410.320\\t`` or ``1.69512E+15``), rounded half up."""
    return int((Decimal(text.strip()) * 1000).to_integral_value(ROUND_HALF_UP))


@dataclass
class Csv:
    """A CSV file's header and whole rows (as many cells as the header), with their 1-based lines,
    and the lines of the other rows."""

    header: list[str]
    rows: list[dict[str, str]]
    lines: list[int]
    short: list[int]

    def column(self, name: str) -> list[str]:
        return [r[name] for r in self.rows]

    def floats(self, name: str) -> list[float]:
        """A column's numbers, NaN for an empty or N/A cell."""
        return [float(r[name]) if r[name].strip() not in NA else math.nan for r in self.rows]

    def total(self, name: str, rows: list[dict[str, str]] | None = None) -> Decimal:
        """The exact sum of a column's decimal cells (of ``rows``, default all; empty and N/A cells left out)."""
        return sum((Decimal(r[name]) for r in (self.rows if rows is None else rows) if r[name].strip() not in NA),
                   Decimal(0))


def read_csv(path: Path) -> Csv:
    with open(path, encoding="utf-8-sig", newline="") as f:
        reader = csv.reader(f)
        header = next(reader)
        rows, lines, short = [], [], []
        line = 1
        for cells in reader:
            first, line = line + 1, reader.line_num
            if len(cells) == len(header):
                rows.append(dict(zip(header, cells)))
                lines.append(first)
            elif cells:
                short.append(first)
    return Csv(header, rows, lines, short)


def output(run: Path, name: str) -> Path:
    return run / "ASCEND_PROFILER_OUTPUT" / name


def kernels(run: Path) -> Csv:
    return read_csv(output(run, "kernel_details.csv"))


def collectives(run: Path) -> list[dict[str, str]]:
    """The kernels torch_npu labels collectives (Accelerator Core ``HCCL``)."""
    return [r for r in kernels(run).rows if r["Accelerator Core"] == "HCCL"]


def collective_type(kernel: dict[str, str]) -> str:
    """A collective's type: its Type, or where that is N/A (Level0) the part of its name before
    ``_<group>_<index>_<execution>`` (``hcom_allReduce__868_0_1`` -> ``hcom_allReduce_``)."""
    if kernel["Type"] != "N/A":
        return kernel["Type"]
    name = kernel["Name"]
    return name[:name.index("__") + 1]


def communication_ops(run: Path) -> list[tuple[int, str, dict]]:
    """(step, op name, "Communication Time Info") of every op of communication.json (totals left out)."""
    path = output(run, "communication.json")
    if not path.is_file():
        return []
    out = []
    for step, kinds in json.loads(path.read_text(encoding="utf-8")).items():
        for ops in kinds.values():
            for key, op in ops.items():
                if not key.startswith("Total"):
                    out.append((int(step.removeprefix("step")), key.rsplit("@", 1)[0], op["Communication Time Info"]))
    return out


def union_us(spans: list[tuple[int, int]]) -> float:
    """The length (µs) of the union of ns intervals."""
    total, end = 0, None
    for a, b in sorted(spans):
        if end is None or a > end:
            total += b - a
            end = b
        elif b > end:
            total += b - end
            end = b
    return total / 1000


def spans(rows: list[dict[str, str]]) -> list[tuple[int, int]]:
    """The (start, end) ns of kernels."""
    return [(ns(r["Start Time(us)"]), ns(r["Start Time(us)"]) + ns(r["Duration(us)"])) for r in rows]


def copy_run(run: Path, to: Path, without: tuple[str, ...] = ()) -> Path:
    """A copy of a run directory under ``to`` (same name), without the ``without`` output files."""
    dest = to / run.name
    shutil.copytree(run, dest, ignore=lambda d, names: [n for n in names if n in without])
    return dest
