"""The notebook path: a ``%%geprof`` cell end to end, outputs included (target 9)."""

from __future__ import annotations

import contextlib
import io
import shutil
from collections.abc import Callable

from harness import Result, times
from workloads import scratch_dir

from geprof_nb.nb import explorer

#: What a person types: build ResNet-50 training, run ten steps.
CELL = """\
from geprof_nb import ge
graph = ge.models.resnet50(batch_size=32, training=True, world_size=8)
ge.GEInitialize({})
sess = ge.Session()
sess.add_graph(1, graph)
for _ in range(10):
    sess.run_graph(1)
ge.GEFinalize()
"""
FLAGS = "--task-trace l1 --training-trace on --aic-metrics PipeUtilization --hccl on --aicpu on --task-memory on"


def shell():
    """An IPython shell with the extension loaded (no Jupyter front end: the explorer's static
    twin, the HTML report with its figures, is what gets computed and published)."""
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "geprof_nb")
    return shell


def geprof_cell(quick: bool) -> Result:
    """``%%geprof`` over 10 steps of ResNet-50 training, every layer on, including every static output
    (target: <= 3 s): the explorer's text summary, step timeline PNG and static HTML report with all its
    figures embedded (``explorer.STATIC_FIGURES = "all"``: step timeline, task Gantt, op types, pipe
    ratios, memory lifetimes; by default the report embeds the first two and names the others)."""
    ipython = shell()
    published: dict[str, int] = {}

    def run() -> Callable[[], None]:
        out = scratch_dir()
        sink = io.StringIO()
        with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(io.StringIO()):  # progress line
            ipython.run_cell_magic("geprof", f"{FLAGS} --output {out} -o bench_profile", CELL)
        published["stdout_chars"] = len(sink.getvalue())
        return lambda: shutil.rmtree(out, ignore_errors=True)

    default = explorer.STATIC_FIGURES
    explorer.STATIC_FIGURES = "all"
    try:
        t = times(run)
        bundle = _bundle_sizes(ipython.user_ns["bench_profile"])
    finally:
        explorer.STATIC_FIGURES = default
    median = sorted(t)[len(t) // 2]
    return Result("%%geprof cell, ResNet-50 x10 steps, all layers, every static output (HTML report with all 5 "
                  "figures)", median, "s", "<= 3", median <= 3.0 and bundle["figures_not_embedded"] == 0,
                  {"runs_s": t, "static_figures": "all", **bundle, **published})


def _bundle_sizes(profile) -> dict:
    """Size of each representation the cell published and the figures its HTML report embeds (the
    report's figures are cached per Profile, so this is what the cell drew)."""
    from geprof_nb.nb.display import profile_mimebundle

    bundle = profile_mimebundle(profile)
    page = str(bundle["text/html"])
    return {"mimebundle_chars": {k: len(str(v)) for k, v in bundle.items()},
            "figures_embedded": page.count('<img src="data:image/png;base64,'),
            "figures_not_embedded": page.count("Figure not embedded")}


BENCHMARKS = [geprof_cell]
