"""The advisor's accuracy: generated scenarios with known injected causes, scored against the truth.

Each scenario is a simulated run (one device, or a cluster) built to hold a known set of causes
(:data:`CAUSES`), or none: the clean scenarios are what makes precision mean something.  Every
advisor rule names the cause kind it diagnoses (:data:`RULE_CAUSE`, written once); a scenario's
found causes are those of the rules that fired on it.  Per cause kind, precision is the share of the
scenarios where it was found that hold it, recall the share of those holding it where it was found;
overall figures count (scenario, cause) pairs.  The real ``msprof-analyze advisor all`` reads the same
scenarios' ascend_pt exports and is scored with the same truth through :data:`MSPROF_CAUSE`, a mapping
from its problem categories (the rows of its ``mstt_advisor_*.xlsx`` problems sheet) to the cause kinds.

Scenarios are drawn from a seeded generator, so a run is the same every time.  Each injected cause is
sized to cost at least about 8% of its scenario's step (a cause beside another gets more of it): below
the advisor's 5% bar a cost is, by the advisor's own definition, run-to-run noise.  The real-clock ones
(a host stall, an input pipeline that waits every step) sleep in the loop, and their sleeps are long
enough (tens of ms) that a loaded machine's scheduling delays stay far below them.
"""

from __future__ import annotations

import random
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from harness import Result
from workloads import run_session, scratch_dir

import geprof_nb
from geprof_nb import ge

#: The seed of the scenario generator.
SEED = 29
#: Scenarios of the full run (at least 50) and of ``--quick``.
FULL_SCENARIOS, QUICK_SCENARIOS = 60, 8
#: The targets of the issue, over the set.
TARGET_RECALL = TARGET_PRECISION = 0.95

#: The cause kinds a scenario can hold.
CAUSES = ("aicpu", "memory_bound", "low_cube", "tiny_kernels", "host_bound", "loader_stall", "host_stall",
          "transdata", "comm_exposed", "slow_rank", "slow_link", "pipeline_bubble")

#: Every rule of both advisors and the cause it diagnoses (a rule name shared by both advisors, One-off
#: stall, is one entry).  A rule absent from here (a new one) fails the benchmark: it must be mapped.
RULE_CAUSE = {
    "AI CPU op on the critical path": "aicpu",
    "Memory-bound ops": "memory_bound",
    "Low cube utilisation": "low_cube",
    "Many tiny kernels": "tiny_kernels",
    "Host-bound: device idle between tasks": "host_bound",
    "Dynamic shapes change between steps": "host_bound",
    "Large Data Aug Bound": "loader_stall",
    "One-off stall": "host_stall",
    "TransData format conversions": "transdata",
    "Communication not overlapped with compute": "comm_exposed",
    "Exposed tensor-parallel communication": "comm_exposed",
    "Slow rank": "slow_rank",
    "Straggler": "slow_rank",
    "High wait": "slow_rank",
    "Slow link": "slow_link",
    "Pipeline bubble": "pipeline_bubble",
    "Unbalanced pipeline stages": "pipeline_bubble",
    "Expert imbalance": "pipeline_bubble",
}

#: msprof-analyze advisor's problem categories (the xlsx ``problems`` sheet's first column, lower case, a cluster's
#: ``RANK <n> `` prefix dropped) and the cause each names.  Categories that describe the run rather than name a
#: problem (its summary, the per-op perf tables it writes on every run, the comparisons of two ranks' APIs or
#: kernels) are in :data:`MSPROF_DESCRIPTIVE` and not scored; any other unmapped category is reported.
MSPROF_CAUSE = {
    "aicpu issues": "aicpu",
    "operator bound issues": "memory_bound",
    "operator no bound issues": "low_cube",
    "block dim issues": "low_cube",
    "fusible operator analysis": "tiny_kernels",
    "fusion issues": "tiny_kernels",
    "affinity api issues": "tiny_kernels",
    "operator dispatch issues": "host_bound",
    "operator dynamic shape issues": "host_bound",
    "dataloader issues": "loader_stall",
    "gc issues": "host_stall",
    "conjectured gc": "host_stall",
    "slow rank": "slow_rank",
    "slow link": "slow_link",
    "pipeline parallel issues": "pipeline_bubble",
}
MSPROF_DESCRIPTIVE = ("overall summary", "vector operator perf analysis", "cube operator perf analysis",
                      "byte alignment analysis", "environment variable issues", "api compare of ", "kernel compare of ")

_PMU = {"training_trace": "on", "aic_metrics": "PipeUtilization"}
_CLUSTER_LAYERS = {"training_trace": "on", "hccl": "on"}


@dataclass
class Scenario:
    """One generated run: its name, the causes injected, and how to make it (``run(out)`` -> a run path)."""

    name: str
    causes: frozenset[str]
    run: Callable[[Path], Path] = field(repr=False)
    cluster: bool = False


# ---------------------------------------------------------------------------- graphs
def _graph(name: str, build: Callable[[ge.Graph], object]) -> ge.Graph:
    g = ge.Graph(name)
    out = build(g)
    g.output(out if isinstance(out, list) else [out])
    return g


def _gemms(g: ge.Graph, m: int, k: int, layers: int) -> object:
    """A clean base: ``layers`` large MatMuls (long, well-shaped cube kernels) fed by a small input."""
    y = g.op("Add", [g.variable("a", (m, k), "float16", trainable=False), g.data("x", (k,), "float16")], name="in")
    for i in range(layers):
        y = g.op("MatMulV2", [y, g.variable(f"w{i}", (k, k), "float16")], name=f"fc{i}")
    return y


def _aicpu(g: ge.Graph, rows: int) -> object:
    """A NonZero (AI CPU) over ``rows`` x 1024 that the stream waits for."""
    x = g.variable("mask_in", (rows, 1024), "float16", trainable=False)
    return g.op("NonZero", g.op("Relu", x, name="mask/relu"), name="mask/NonZero", max_output=1024)


def _memory(g: ge.Graph, side: int, ops: int) -> object:
    """``ops`` element-wise ops over ``side`` x ``side`` device tensors: HBM traffic, idle vector unit."""
    y = g.op("Add", [g.variable("big_a", (side, side), "float16", trainable=False),
                     g.data("bias", (side,), "float16")], name="big_add")
    b = g.variable("big_b", (side, side), "float16", trainable=False)
    for i in range(ops - 1):
        y = g.op("Mul", [y, b], name=f"big_mul{i}") if i % 2 == 0 else g.op("Relu", y, name=f"big_relu{i}")
    return y


def _tiny(g: ge.Graph, n: int) -> object:
    """A chain of ``n`` tiny element-wise kernels."""
    y = g.data("t", (16, 16), "float16")
    for i in range(n):
        y = g.op("Relu", y, name=f"tiny{i}") if i % 2 else g.op("Add", [y, y], name=f"tiny{i}")
    return y


def _small_m(g: ge.Graph, m: int, layers: int) -> object:
    """Small-M MatMuls against 4096x4096 weights: each call streams its weights for few MACs (memory-bound on the
    roofline: M FLOPs per weight byte, far below the ridge)."""
    y = g.data("v", (m, 4096), "float16")
    for i in range(layers):
        y = g.op("MatMulV2", [y, g.variable(f"wv{i}", (4096, 4096), "float16")], name=f"gemv{i}")
    return y


def _transdata(g: ge.Graph, convs: int) -> object:
    """Convolutions with a round trip through 5HD before each."""
    y = g.op("Add", [g.variable("feat", (32, 64, 56, 56), "float16", trainable=False),
                     g.data("c", (1, 64, 1, 1), "float16")])
    for i in range(convs):
        y = g.op("TransData", y, name=f"to5hd_{i}", dst_format="NC1HWC0")
        y = g.op("TransData", y, name=f"tonchw_{i}", dst_format="NCHW")
        y = g.op("Conv2D", [y, g.variable(f"k{i}", (64, 64, 3, 3), "float16")], name=f"conv{i}", strides=1, pads=1)
    return y


# ---------------------------------------------------------------------------- runs
def _single(graph: ge.Graph, steps: int = 3, clock: str = "virtual", options: dict | None = None,
            before_step: Callable[[int], None] | None = None,
            inputs: Callable[[int], list] | None = None) -> Callable[[Path], Path]:
    def run(out: Path) -> Path:
        return run_session(graph, steps, dict(_PMU, **(options or {})), out, inputs=inputs, clock=clock,
                           before_step=before_step)
    return run


def _cluster(graph: ge.Graph, ranks: int, faults: dict | None, steps: int = 6) -> Callable[[Path], Path]:
    session = {"ge.exec.rankSize": str(ranks)}
    if faults:
        import json

        session["geprof.faults"] = json.dumps(faults)

    def run(out: Path) -> Path:
        return run_session(graph, steps, _CLUSTER_LAYERS, out, session=session)
    return run


def _sleep(seconds: dict[int, float]) -> Callable[[int], None]:
    """The user's loop sleeping before the (0-based) steps ``seconds`` names."""
    def before(k: int) -> None:
        if k in seconds:
            time.sleep(seconds[k])
    return before


def _resnet(world: int) -> ge.Graph:
    return ge.models.resnet50(batch_size=8, image_size=112, training=True, world_size=world)


# ---------------------------------------------------------------------------- generator
def _single_device(kind: str, r: random.Random, i: int) -> Scenario:
    """One single-device scenario of ``kind`` (a cause, a pair of causes joined by '+', or 'clean')."""
    parts = set(kind.split("+")) - {"clean"}
    truth = frozenset(KIND_CAUSE.get(p, p) for p in parts)
    real_clock = bool(parts & {"loader_stall", "host_stall"})
    # on the real clock the simulator's own Python between steps (100-300 us on a loaded 2-core machine) is host
    # time no one injected: a longer step (4-6 MatMuls, 2-3 ms) keeps it under the advisor's bars
    m, k, layers = r.choice((3072, 4096)), 4096, r.randint(4, 6) if real_clock else r.randint(1, 2)
    pieces: list[Callable[[ge.Graph], object]] = [lambda g: _gemms(g, m, k, layers)]  # ~0.4-1 ms of clean cube
    if "aicpu" in parts:
        rows = r.choice((512, 768, 1024))
        pieces.append(lambda g: _aicpu(g, rows))
    if "memory_bound" in parts:
        side, n = 4096, r.randint(8, 12)
        pieces.append(lambda g: _memory(g, side, n))
    if "tiny_kernels" in parts:
        n = r.randint(150, 300) if parts == {"tiny_kernels"} else r.randint(300, 450)  # beside another cause
        pieces.append(lambda g: _tiny(g, n))
    if "small_m_matmul" in parts:
        mm, ll = r.choice((8, 16, 32)), r.randint(8, 16)
        pieces.append(lambda g: _small_m(g, mm, ll))
    if "transdata" in parts:
        c = r.randint(2, 4)
        pieces.append(lambda g: _transdata(g, c))
    name = f"{i:02d}_{kind}"
    if "host_bound" in parts:  # a dynamic-shape graph: node by node, InferShape + Tiling + a launch per op
        batch = r.choice((4, 8, 16))
        graph = ge.models.mlp(batch_size=batch, hidden=(64,), training=False, dynamic=True)
        return Scenario(name, truth, _single(graph, options={"ge_api": "l1"}))
    if "loader_stall" in parts and r.random() < 0.5:  # a slow dataset iterator (GetNext) every step
        graph = ge.models.mlp(batch_size=r.choice((2048, 4096)), training=False, data="GetNext")
        return Scenario(name, truth, _single(graph))
    graph = _graph(name, lambda g: [p(g) for p in pieces])
    if "loader_stall" in parts:  # the user's input pipeline: 25-40 ms before every step, real clock
        s = r.uniform(0.025, 0.04)
        return Scenario(name, truth, _single(graph, steps=6, clock="real",
                                                        before_step=_sleep({j: s for j in range(6)})))
    if "host_stall" in parts:  # once: 150-300 ms before one step of 8 (a checkpoint, an evaluation)
        at = r.randint(3, 6)
        return Scenario(name, truth, _single(graph, steps=8, clock="real",
                                                        before_step=_sleep({at: r.uniform(0.15, 0.3)})))
    return Scenario(name, truth, _single(graph))


def _cluster_scenario(kind: str, r: random.Random, i: int) -> Scenario:
    name = f"{i:02d}_cluster_{kind}"
    if kind == "pipeline_bubble":
        pp = r.choice((2, 4))
        parallel = ge.Parallel(pp=pp, micro_batches=r.choice((1, 2, 4)))
        graph = ge.models.llm("tiny-llama", parallel=parallel, layers=r.choice((8, 16)))
        return Scenario(name, frozenset({kind}), _cluster(graph, pp, None), cluster=True)
    ranks = 8
    faults: dict = {}
    if kind == "slow_rank":
        faults = {"slow_ranks": {str(r.randrange(ranks)): round(r.uniform(1.3, 1.8), 2)}}
    elif kind == "slow_link":
        a = r.randrange(ranks - 1)
        faults = {"slow_links": {f"{a}-{a + 1}": round(r.uniform(0.3, 0.6), 2)}}
    elif kind == "host_stall":  # a data loader that stalls once on one rank
        faults = {"loader_stall": {"every": 5, "us": r.randint(15_000, 30_000), "ranks": [r.randrange(ranks)]}}
    return Scenario(name, frozenset({kind} - {"clean"}), _cluster(_resnet(ranks), ranks, faults), cluster=True)


#: A kind of injection named apart from the cause it is: small-M MatMuls are memory-bound MatMuls.
KIND_CAUSE = {"small_m_matmul": "memory_bound"}
#: The kinds drawn, in turn: single causes, pairs, clean runs, cluster faults.
SINGLE_KINDS = ("clean", "aicpu", "memory_bound", "tiny_kernels", "small_m_matmul", "transdata", "host_bound",
                "loader_stall", "host_stall", "aicpu+memory_bound", "aicpu+tiny_kernels", "memory_bound+tiny_kernels",
                "clean", "tiny_kernels+host_stall")
CLUSTER_KINDS = ("clean", "slow_rank", "slow_link", "host_stall", "pipeline_bubble")


def scenarios(n: int, seed: int = SEED) -> list[Scenario]:
    """``n`` scenarios: single-device and cluster kinds interleaved (about 3 to 1), parameters from ``seed``."""
    r = random.Random(seed)
    out = []
    for i in range(n):
        if i % 4 == 3:
            out.append(_cluster_scenario(CLUSTER_KINDS[(i // 4) % len(CLUSTER_KINDS)], r, i))
        else:
            out.append(_single_device(SINGLE_KINDS[(i - i // 4) % len(SINGLE_KINDS)], r, i))
    return out


# ---------------------------------------------------------------------------- scoring
def found_causes(rules: list[str]) -> set[str]:
    """The causes that fired rules name; an unmapped rule is an error (map it in :data:`RULE_CAUSE`)."""
    unknown = sorted(set(rules) - set(RULE_CAUSE))
    if unknown:
        raise KeyError(f"advisor rules with no cause kind in RULE_CAUSE: {unknown}")
    return {RULE_CAUSE[x] for x in rules}


def score(truth: list[frozenset[str]], found: list[set[str]]) -> dict:
    """Per cause and overall: true/false positives, misses, precision and recall (None where undefined)."""
    def ratio(a: int, b: int) -> float | None:
        return round(a / b, 4) if b else None

    per = {}
    for c in CAUSES:
        tp = sum(c in t and c in f for t, f in zip(truth, found))
        fp = sum(c not in t and c in f for t, f in zip(truth, found))
        fn = sum(c in t and c not in f for t, f in zip(truth, found))
        if tp or fp or fn:
            per[c] = {"tp": tp, "fp": fp, "fn": fn, "precision": ratio(tp, tp + fp), "recall": ratio(tp, tp + fn)}
    tp, fp, fn = (sum(v[k] for v in per.values()) for k in ("tp", "fp", "fn"))
    return {"per_cause": per, "tp": tp, "fp": fp, "fn": fn, "precision": ratio(tp, tp + fp),
            "recall": ratio(tp, tp + fn)}


def advice_of(path: Path) -> "tuple[list[str], np.ndarray, float]":
    """A run's (or cluster's) findings: their rules, their exclusive time at stake, the step they are shares of."""
    found = geprof_nb.load(path).advise()
    step = found.attrs.get("step_us", float("nan"))
    return found["Rule"].tolist(), found["Exclusive time at stake (us)"].to_numpy(float), step


# ---------------------------------------------------------------------------- msprof-analyze
def _msprof_analyze() -> str | None:
    beside = Path(sys.executable).with_name("msprof-analyze")
    return shutil.which("msprof-analyze") or (str(beside) if beside.exists() else None)


def msprof_categories(exe: str, data: Path, work: Path) -> list[str]:
    """The problem categories ``msprof-analyze advisor all`` reports on ``data`` (an ascend_pt directory, or a
    cluster's directory of them): the first column of its xlsx ``problems`` sheet."""
    import openpyxl

    work.mkdir(parents=True, exist_ok=True)
    done = subprocess.run([exe, "advisor", "all", "-d", str(data), "-o", str(work), "-l", "en"], cwd=work,
                          capture_output=True, text=True, timeout=900)
    books = sorted((work / "log").glob("mstt_advisor_*.xlsx"))
    if not books:
        raise RuntimeError(f"msprof-analyze advisor wrote no xlsx for {data}:\n{done.stdout[-2000:]}{done.stderr}")
    book = openpyxl.load_workbook(books[-1], read_only=True)
    sheet = book["problems"]
    rows = list(sheet.iter_rows(values_only=True))
    return sorted({str(row[0]).strip() for row in rows[1:] if row and row[0]})


def msprof_found(categories: list[str]) -> tuple[set[str], list[str]]:
    """The causes msprof-analyze's categories name, and the categories no mapping covers (reported, not scored)."""
    names = [re.sub(r"^rank \d+ ", "", c.strip().lower()) for c in categories]
    causes = {MSPROF_CAUSE[c] for c in names if c in MSPROF_CAUSE}
    other = sorted({c for c in names if c not in MSPROF_CAUSE and not c.startswith(MSPROF_DESCRIPTIVE)})
    return causes, other


# ---------------------------------------------------------------------------- the benchmark
def evaluate(items: list[Scenario], with_msprof: bool = True) -> dict:
    """Run every scenario, advise on it, and score ours (and msprof-analyze's) findings against the truth."""
    exe = _msprof_analyze() if with_msprof else None
    root = scratch_dir("geprof_advisor_")
    rows, ours, theirs, stake_over = [], [], [], []
    unmapped: set[str] = set()
    for s in items:
        out = root / s.name
        path = s.run(out)
        rules, exclusive, step = advice_of(path)
        causes = found_causes(rules)
        ours.append(causes)
        if np.isfinite(step) and exclusive.sum() > step + 1e-3:  # the table rounds to the ns
            stake_over.append(s.name)
        row = {"scenario": s.name, "truth": sorted(s.causes), "rules": rules, "found": sorted(causes),
               "exclusive_sum_us": round(float(exclusive.sum()), 3), "step_us": round(float(step), 3)}
        if exe:
            export = geprof_nb.load(path).export(out / "export", "ascend_pt")
            categories = msprof_categories(exe, export if not s.cluster else out / "export", out / "advisor")
            mapped, other = msprof_found(categories)
            unmapped.update(other)
            theirs.append(mapped)
            row.update(msprof_categories=categories, msprof_found=sorted(mapped))
        rows.append(row)
        shutil.rmtree(out, ignore_errors=True)
    truth = [s.causes for s in items]
    return {"scenarios": rows, "ours": score(truth, ours), "msprof_analyze": score(truth, theirs) if exe else None,
            "msprof_unmapped_categories": sorted(unmapped), "stake_over_step": stake_over}


def advisor_accuracy(quick: bool) -> Result:
    """Our advisor's recall and precision over the generated scenarios (the figure: the lower of the two);
    the full run scores msprof-analyze's advisor beside ours (``--quick`` leaves it out: ~20 s a cluster)."""
    n = QUICK_SCENARIOS if quick else FULL_SCENARIOS
    t = time.perf_counter()
    detail = evaluate(scenarios(n), with_msprof=not quick)
    detail["seconds"] = round(time.perf_counter() - t, 1)
    ours = detail["ours"]
    figure = min(ours["recall"] or 0.0, ours["precision"] or 0.0)
    passed = (ours["recall"] or 0) >= TARGET_RECALL and (ours["precision"] or 0) >= TARGET_PRECISION \
        and not detail["stake_over_step"]
    detail["n"] = n
    return Result(f"advisor accuracy, {n} generated scenarios: min(recall, precision)", figure, "",
                  f">= {TARGET_RECALL}", passed, detail)


BENCHMARKS = [advisor_accuracy]
