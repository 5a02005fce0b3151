"""Helpers shared by the test suites (imported by conftest.py and by test modules).

Kept out of conftest.py so test modules can import them by a unique module name
(several directories have their own conftest.py).
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import geprof_nb
from geprof_nb import ge
from geprof_nb.collect import replayer
from geprof_nb.ge import session_log
from geprof_nb.ge.runtime import MODEL_IDS
from geprof_nb.ge.session import new_session_log

#: Absolute tolerance (us) for comparing float-us timestamps (~1.77e15 us, float64 ulp 0.25 us).
TS_TOL_US = 0.5


@dataclass
class ProfiledRun:
    """What a profiled session leaves behind."""

    profile: Any  # geprof_nb.Profile
    graph: Any  # ge.Graph
    table: Any  # compiler.TaskTable of the loaded model (launch order)
    compiled: Any  # compiler.CompiledModel
    model_id: int
    steps: int
    output: Path
    notes: list[str] = field(default_factory=list)

    @property
    def n_kernels(self) -> int:
        """Kernel tasks (compute + communication) of the loaded model."""
        return sum(1 for k in self.table.kernels if k is not None)


def run_profiled_session(output: Path, graph: Any, steps: int = 3, *, device: str | None = None,
                         executor: str | None = None, clock: str = "virtual",
                         ge_options: dict[str, str] | None = None, **profiling: Any) -> ProfiledRun:
    """GEInitialize with profiling on -> add_graph -> run_graph x steps -> GEFinalize -> load, as a script
    run on its own: a new process to GE's model ids (so two such runs in one test are alike).  The Profile's
    ``replay`` re-issues those calls (the GE calls are logged as a collection logs them)."""
    MODEL_IDS.restart()
    prof = {"output": str(output), "training_trace": "on", "aic_metrics": "PipeUtilization"}
    prof.update(profiling)
    options = {
        "ge.exec.profilingMode": "1",
        "ge.exec.profilingOptions": json.dumps(prof),
        "geprof.clock": clock,
    }
    if device:
        options["geprof.device"] = device
    if executor:
        options["geprof.executor"] = executor
    options.update(ge_options or {})
    with session_log.recording(new_session_log()) as log:
        assert ge.GEInitialize(options) == ge.SUCCESS, ge.GEGetErrorMsg()
        try:
            sess = ge.Session()
            assert sess.add_graph(1, graph) == ge.SUCCESS, ge.GEGetErrorMsg()
            for _ in range(steps):
                assert sess.run_graph(1) == ge.SUCCESS, ge.GEGetErrorMsg()
            model = sess.model(1)
            table, compiled, model_id, notes = model.table, model.compiled, model.model_id, list(model.notes)
        finally:
            ge.GEFinalize()
    profile = geprof_nb.load(output)
    profile.replay = replayer(log, None)
    return ProfiledRun(profile, graph, table, compiled, model_id, steps, Path(output), notes)


def step_headline_by_hand(profile: Any, steps: list[int]) -> str:
    """The step figure of ``steps`` (whole step periods, no outlier among them) from step_breakdown's
    cells: "step X ms = Computing a% / exposed Communication b% / Free c%"."""
    sb = profile.step_breakdown.set_index("Step").loc[steps]
    computing, exposed, free = (float(sb[c].mean()) for c in ("Computing", "Communication(Not Overlapped)", "Free"))
    length = computing + exposed + free
    return (f"step {length / 1000:.3f} ms = Computing {100 * computing / length:.1f}% / exposed Communication "
            f"{100 * exposed / length:.1f}% / Free {100 * free / length:.1f}%")


def small_resnet(world_size: int = 8, **kw: Any):
    return ge.models.resnet50(batch_size=2, image_size=64, training=True, world_size=world_size, **kw)


def build_tiny_graph(world_size: int = 2, bucket_bytes: int | None = None, training: bool = True):
    """A hand-built graph whose FP/BP points are known.

    Node order: ``x`` (first Data), ``labels`` (Data), a small op chain on
    ``labels`` *before* the first consumer of ``x`` (so the FP point is not simply
    the first compute op), then ``x @ w1 -> Relu -> @ w2 -> xent(+labels') -> mean``.
    """
    g = ge.Graph("tiny")
    x = g.data("x", (8, 16), "float16")
    labels = g.data("labels", (8, 4), "float16")
    lab = g.op("Relu", labels, name="labels_relu")  # consumer of the *second* Data, created first
    w1 = g.variable("w1", (16, 32), "float16")
    h = g.op("MatMulV2", [x, w1], name="fc1")  # lowest-id consumer of the first Data -> FP point
    h = g.op("Relu", h, name="act1")
    w2 = g.variable("w2", (32, 4), "float16")
    logits = g.op("MatMulV2", [h, w2], name="fc2")
    loss, _ = g.op("SoftmaxCrossEntropyWithLogits", [logits, lab], name="xent")
    loss = g.op("ReduceMean", loss, name="loss", axes=[0])
    if not training:
        g.output([loss])
        return g, None
    kwargs = {} if bucket_bytes is None else {"bucket_bytes": bucket_bytes}
    info = ge.add_training(g, loss, world_size=world_size, **kwargs)
    return g, info


def read_csv(path: Path) -> tuple[list[str], list[list[str]]]:
    """An exported CSV's header and rows, as the strings in the file."""
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))
    return rows[0], rows[1:]


def run_aged(output: Path, limit_bytes: int | None, steps: int = 12, chunk_records: int = 64):
    """A small 2-rank MLP training run whose oldest chunks age out past ``limit_bytes`` (``None``: no
    limit, the reference run), made small as tests/prof/test_storage_limit.py does: few records per
    chunk, and the parsed limit replaced right after init.  Returns the loaded Profile.  A new process to
    GE's model ids, as :func:`run_profiled_session` is.

    The step trace does not age here (as if the ts_track channel were stored apart from the task logs),
    so the run has steps whose step trace outlived their task records: the case the analysis must not
    read as a whole step of idle device.  (msprof's checkpoints write every kind with each full chunk,
    so in our own runs the two age together.)  The static description counts towards the limit: 22,000
    bytes keep the last 2 of the 12 steps' task records, 18,000 none."""
    from geprof_nb.prof import msprof, rawdata

    MODEL_IDS.restart()
    step_trace = rawdata.RECORD_KINDS["step_trace"]
    rawdata.RECORD_KINDS["step_trace"] = replace(step_trace, aging=False)
    opts = {"output": str(output), "storage_limit": "200MB", "training_trace": "on"}
    assert ge.GEInitialize({"geprof.clock": "virtual", "ge.exec.profilingMode": "1",
                            "ge.exec.profilingOptions": json.dumps(opts)}) == ge.SUCCESS
    default_chunk = msprof.lib.chunk_records
    msprof.lib.chunk_records, msprof.lib.storage_limit_bytes = chunk_records, limit_bytes
    try:
        sess = ge.Session()
        assert sess.add_graph(1, ge.models.mlp(batch_size=4, in_features=16, hidden=(16,), training=True,
                                               world_size=2)) == ge.SUCCESS
        for _ in range(steps):
            assert sess.run_graph(1) == ge.SUCCESS, ge.GEGetErrorMsg()
    finally:
        ge.GEFinalize()
        msprof.lib.chunk_records = default_chunk
        rawdata.RECORD_KINDS["step_trace"] = step_trace
    return geprof_nb.load(output)


def run_two_graphs(output: Path):
    """Graph 1 (MLP training, batch 32) and graph 2 (a small MLP inference) run alternately, 3 times each:
    each of graph 2's iterations runs inside one of graph 1's step windows.  Returns the loaded Profile.
    A new process to GE's model ids (graph 1 is model 1), as :func:`run_profiled_session` is."""
    MODEL_IDS.restart()
    with ge.simulation_settings(clock_mode="virtual"):
        sess = ge.Session()
        try:
            assert sess.add_graph(1, ge.models.mlp(batch_size=32, training=True)) == ge.SUCCESS
            with geprof_nb.profile(output=str(output)) as block:
                assert sess.add_graph(2, ge.models.mlp(batch_size=8, training=False, hidden=(512,))) == ge.SUCCESS
                for _ in range(3):
                    assert sess.run_graph(1) == ge.SUCCESS and sess.run_graph(2) == ge.SUCCESS
        finally:
            ge.GEFinalize()
    return block.profile


def serve_profiled(output: Path, model: str = "tiny-llama", **serve: Any):
    """``ge.serve(model, **serve)`` in a ``geprof_nb.profile()`` block on the virtual clock: (its result,
    the loaded Profile)."""
    MODEL_IDS.restart()
    with ge.simulation_settings(clock_mode="virtual"):
        try:
            with geprof_nb.profile(output=str(output)) as block:
                result = ge.serve(model, **serve)
        finally:
            ge.GEFinalize()
    return result, block.profile


def step_times_us(output: Path, graphs: list[Any]) -> list[float]:
    """One profiled run of each graph in one session on the virtual clock: each run's simulated step time
    (us, the step trace's Iteration Time)."""
    with ge.simulation_settings(clock_mode="virtual"):
        sess = ge.Session()
        try:
            with geprof_nb.profile(output=str(output)) as block:
                for i, g in enumerate(graphs, 1):
                    assert sess.add_graph(i, g) == ge.SUCCESS, ge.GEGetErrorMsg()
                    assert sess.run_graph(i) == ge.SUCCESS, ge.GEGetErrorMsg()
        finally:
            ge.GEFinalize()
    return block.profile.step_trace["Iteration Time(us)"].tolist()
