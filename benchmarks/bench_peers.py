"""Side by side with the peers, both sides in one process, a process of its own per comparison (targets 4 and 5):

* an enabled host scope vs ``torch.profiler.record_function`` under an active CPU
  ``torch.profiler.profile`` and vs VizTracer's custom events (``log_event``);
* our op_statistic vs torch.profiler's ``key_averages()`` over as many events;
* Holistic Trace Analysis loading a trace vs our importer reading the same trace_view.json.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import statistics
import sys
import time
from pathlib import Path

from harness import Comparison, Result, alternate_self_timed, compare, isolated, skipped
from workloads import resnet_run, scratch_dir

from geprof_nb.prof.host_profiler import ProfilingEvent, global_profiler
from geprof_nb.prof.properties import BIT_GE_HOST, GlobalProfilingWrapper
from geprof_nb.prof.scope import profiling_scope


@isolated
def host_scope_vs_peers(quick: bool) -> Result:
    """Per-event cost of an enabled ``profiling_scope`` (GE's host layer on) vs the faster of
    torch's ``record_function`` (CPU profiler active) and VizTracer's ``log_event`` (tracer running)
    (target: <= 0.5x).  Tracers are started before and stopped after each timed loop."""
    try:
        import torch
        from viztracer import VizTracer
    except ImportError as exc:
        return skipped("enabled host scope / faster peer", "x", "<= 0.5", exc.name or "torch")

    n = 5_000 if quick else 50_000
    event = ProfilingEvent.kInferShape

    def ours() -> float:
        saved = GlobalProfilingWrapper.enable_flags
        GlobalProfilingWrapper.set_enable_flags(saved | BIT_GE_HOST)
        try:
            t = time.perf_counter()
            for _ in range(n):
                with profiling_scope("node", event):
                    pass
            return time.perf_counter() - t
        finally:
            GlobalProfilingWrapper.set_enable_flags(saved)
            global_profiler.take()

    def torch_side() -> float:
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]):
            t = time.perf_counter()
            for _ in range(n):
                with torch.profiler.record_function("node"):
                    pass
            return time.perf_counter() - t

    tracer = VizTracer(tracer_entries=max(1_000_000, 8 * n), verbose=0, register_global=False)

    def viztracer_side() -> float:
        tracer.start()
        t = time.perf_counter()
        for _ in range(n):
            with tracer.log_event("node"):
                pass
        elapsed = time.perf_counter() - t
        tracer.stop()
        tracer.clear()
        return elapsed

    with _quiet():
        runs = alternate_self_timed({"ours": ours, "torch": torch_side, "viztracer": viztracer_side})
    ns = {k: statistics.median(v) / n * 1e9 for k, v in runs.items()}
    faster = min(("torch", "viztracer"), key=ns.get)
    c = Comparison(runs["ours"], runs[faster])  # the rounds' ratios, as every comparison reports them
    other = "viztracer" if faster == "torch" else "torch"
    return Result(f"enabled host scope / faster peer ({faster})", c.ratio, "x", "<= 0.5", c.ratio <= 0.5,
                  {**c.detail("ours", faster, 1e9 / n, "ns_per_event"), "faster_peer": faster,
                   f"{other}_median_ns_per_event": ns[other], f"{other}_runs_s": runs[other], "events_per_run": n})


OP_STAT_EVENTS = 100_000


@isolated
def op_statistic_vs_key_averages(quick: bool) -> Result:
    """Our op_statistic from a fresh Profile of a run with N op tasks (raw records read, op rows
    built, aggregated) vs ``key_averages()`` of a torch CPU profile holding N ``record_function``
    events (already collected and parsed by the profiler) (target: <= 0.2x)."""
    try:
        import torch
    except ImportError:
        return skipped("op_statistic / torch key_averages()", "x", "<= 0.2", "torch")

    from geprof_nb.analysis import Profile
    from geprof_nb.analysis.rundir import RunDir

    n = 40_000 if quick else OP_STAT_EVENTS
    run = resnet_run(int(n / 0.97) + 1)  # about 97% of a ResNet-50 step's task records are op tasks
    rows = len(Profile(RunDir(run)).op_summary)
    with _quiet():
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
            for i in range(rows):
                with torch.profiler.record_function(f"op{i % 50}"):
                    pass
        events = len(prof.events())

    def ours() -> None:
        Profile(RunDir(run)).op_statistic

    def theirs() -> None:
        prof.key_averages()

    c = compare(ours, theirs)
    return Result(f"op_statistic / torch key_averages(), {rows:,} events", c.ratio, "x", "<= 0.2", c.ratio <= 0.2,
                  {**c.detail("ours", "key_averages"), "op_tasks": rows, "torch_events": events})


@isolated
def hta_vs_importer(quick: bool) -> Result:
    """Holistic Trace Analysis loading a trace (``TraceAnalysis``) vs our importer reading the
    ``trace_view.json`` of our ascend_pt export with the same events (target: <= 0.5x).

    The two do not keep the same: both parse every event, but our importer keeps what the analysis
    reads from a trace (the ProfilerStep# spans, the torch_to_npu flows, the device label) while HTA
    builds a DataFrame row for every event; the row's name says so.

    HTA wants numeric timestamps and a rank: its copy of the file has ``ts`` as numbers and
    ``distributedInfo`` added (made before timing); the event list is the same.  Each side parses
    with its default: ours orjson, HTA its default backend (stdlib json; ijson is opt-in), named
    in the detail.
    """
    try:
        from hta.common.trace_parser import get_default_trace_parsing_backend
        from hta.trace_analysis import TraceAnalysis
    except ImportError:
        return skipped("trace_view.json import (steps, flows) / HTA TraceAnalysis (every event)", "x", "<= 0.5",
                       "HolisticTraceAnalysis")
    import geprof_nb
    from geprof_nb.analysis.sources.trace_view import read_trace_view

    run = resnet_run(5_000 if quick else 100_000)
    export = geprof_nb.load(run).export(scratch_dir() / "x", format="ascend_pt")
    trace = next(Path(export).rglob("trace_view.json"))
    events = json.loads(trace.read_text())
    for ev in events:
        if "ts" in ev:
            ev["ts"] = float(ev["ts"])
    hta_dir = scratch_dir()
    (hta_dir / "rank-0.json").write_text(json.dumps({"traceEvents": events, "distributedInfo": {"rank": 0}}))

    def ours() -> None:
        read_trace_view(trace)

    def hta() -> None:
        with _quiet():
            TraceAnalysis(trace_dir=str(hta_dir))

    c = compare(ours, hta)
    return Result(f"trace_view.json import (steps, flows) / HTA TraceAnalysis (every event), {len(events):,} events",
                  c.ratio, "x", "<= 0.5",
                  c.ratio <= 0.5, {**c.detail("ours", "hta"), "events": len(events),
                                   "trace_mb": trace.stat().st_size / 2**20, "ours_parser": "orjson",
                                   "hta_parser": get_default_trace_parsing_backend().value})


@contextlib.contextmanager
def _quiet():
    """Peers print progress (HTA's logger; torch's profiler start/stop lines, written by C++ straight
    to the file descriptors): keep the table readable."""
    level = logging.root.manager.disable
    logging.disable(logging.CRITICAL)
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (*saved, devnull):
            os.close(fd)
        logging.disable(level)


BENCHMARKS = [host_scope_vs_peers, op_statistic_vs_key_averages, hta_vs_importer]
