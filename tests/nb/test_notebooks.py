"""Every notebook under notebooks/ executes headless with nbclient and shows rich output."""

import re
import shutil
import sys
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from helpers.notebook_outputs import normalised

NOTEBOOK_DIR = Path(__file__).resolve().parents[2] / "notebooks"
NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("*.ipynb"))
HAVE_MSPROF_ANALYZE = bool(shutil.which("msprof-analyze") or Path(sys.executable).with_name("msprof-analyze").exists())
# each notebook runs a fresh kernel (up to a minute for the cluster one)
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def executed(tmp_path_factory):
    """``executed(name)`` -> (notebook with outputs, its working directory); each runs once per module."""
    done = {}

    def run(name: str):
        if name not in done:
            workdir = tmp_path_factory.mktemp(Path(name).stem)
            nb = nbformat.read(NOTEBOOK_DIR / name, as_version=4)
            NotebookClient(nb, timeout=600, kernel_name="python3",
                           resources={"metadata": {"path": str(workdir)}}).execute()
            done[name] = nb, workdir
        return done[name]

    return run


def outputs_of(nb: nbformat.NotebookNode) -> list[dict]:
    return [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]


def cell_starting(nb: nbformat.NotebookNode, prefix: str) -> nbformat.NotebookNode:
    return next(c for c in nb.cells if c.cell_type == "code" and c.source.startswith(prefix))


def text_of(cell: nbformat.NotebookNode) -> str:
    return "".join(o.get("text", "") or o.get("data", {}).get("text/plain", "") for o in cell.outputs)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs_without_errors(path, executed):
    nb, _ = executed(path.name)
    errors = [o for o in outputs_of(nb) if o.get("output_type") == "error"]
    assert errors == []
    mimes = {m for o in outputs_of(nb) for m in o.get("data", {})}
    assert {"text/html", "image/png"} <= mimes


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_stored_outputs_are_what_a_fresh_execution_gives(path, executed):
    """Notebooks are committed executed (``python notebooks/execute.py``); a change that moves an output
    fails here until they are executed again."""
    stored = normalised(nbformat.read(path, as_version=4))
    fresh = normalised(executed(path.name)[0])
    assert any(stored), f"{path.name} is stored without outputs: run python notebooks/execute.py"
    assert len(stored) == len(fresh)
    for i, (was, now) in enumerate(zip(stored, fresh)):
        assert was == now, f"{path.name}, code cell {i}: the stored outputs differ from a fresh execution"


WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"


def explorer_outputs(cell: nbformat.NotebookNode) -> list[dict]:
    """The data of a cell's outputs that show a geprof explorer (widget view + static fallback)."""
    return [o["data"] for o in cell.outputs if WIDGET_VIEW in o.get("data", {})]


def widget_state(nb: nbformat.NotebookNode) -> dict:
    """The widget models nbclient stored in the notebook's metadata, by model id."""
    return nb.metadata["widgets"][WIDGET_STATE]["state"]


def test_quickstart_profile_cell_shows_the_explorer_and_its_static_fallback(executed):
    nb, workdir = executed("01_quickstart.ipynb")
    cell = cell_starting(nb, "%%geprof")
    (shown,) = explorer_outputs(cell)
    assert {WIDGET_VIEW, "text/html", "image/png", "text/plain"} <= set(shown)
    assert [o for o in cell.outputs if o.get("output_type") == "display_data"] == cell.outputs  # one display call
    html = shown["text/html"]
    for title in ("Summary", "Ops", "Steps", "Timeline", "AI Core", "Memory", "API/Host", "Advice"):
        assert f"<h3>{title}</h3>" in html
    assert "Showing 20 of 790 op tasks (all OP Types, iteration 10)" in html and "aic_mac_ratio" in html
    assert "step_trace (times in us since the run&#x27;s first step" in html and ": 10 rows</h4>" in html
    assert "op_statistic" in html
    assert "--task-memory on" in html  # the quickstart does not collect memory: the tab says how to
    assert html.count('<img src="data:image/png;base64,') == 3  # step chart, step timeline, task Gantt
    assert shown["image/png"].startswith("iVBOR")  # base64 PNG
    assert re.search(r"\| step \d+\.\d{3} ms = Computing [\d.]+% / exposed Communication [\d.]+% / Free [\d.]+% \| "
                     r"10 steps \|", shown["text/plain"])
    # nbclient kept the live widgets' state: the explorer's root box and its tabs are there
    state = widget_state(nb)
    root = state[shown[WIDGET_VIEW]["model_id"]]
    assert root["model_name"] == "VBoxModel" and "geprof-explorer" in root["state"]["_dom_classes"]
    (tab,) = [state[ref.removeprefix("IPY_MODEL_")] for ref in root["state"]["children"]]
    assert tab["model_name"] == "TabModel" and tab["state"]["titles"][6] == "API/Host"
    assert list(workdir.glob("geprof_output/PROF_*/info.json"))


def test_every_displayed_geprof_cell_shows_the_explorer(executed):
    nb, _ = executed("07_export_and_real_tools.ipynb")
    (shown,) = explorer_outputs(cell_starting(nb, "%%geprof"))
    assert shown[WIDGET_VIEW]["model_id"] in widget_state(nb)
    assert "<h3>Memory</h3>" in shown["text/html"] and "Peak" in shown["text/html"]  # --task-memory on


def test_export_notebook_reads_back_what_it_wrote(executed):
    nb, workdir = executed("07_export_and_real_tools.ipynb")
    table = text_of(cell_starting(nb, "def same(a, b)"))
    assert table.count("True") == 13 and "False" not in table  # 8 msprof + 5 ascend_pt tables
    assert "equal to the run" in table
    assert "False" not in text_of(cell_starting(nb, 'pq_dir = run.export'))
    assert len(list(workdir.glob("exports/cluster/*_ascend_pt/ASCEND_PROFILER_OUTPUT/kernel_details.csv"))) == 2
    assert len(list(workdir.glob("exports/db/*_ascend_pt/ASCEND_PROFILER_OUTPUT/ascend_pytorch_profiler_*.db"))) == 2
    table = text_of(cell_starting(nb, "from_db = geprof_nb.load"))
    assert table.count("True") == 8 and "False" not in table  # the DB read back: every table shown equal
    if HAVE_MSPROF_ANALYZE:
        recipe = text_of(cell_starting(nb, "if HAVE_ANALYZE:\n    msprof_analyze(\"cluster\", \"-d\", db_dir"))
        assert "msprof-analyze cluster" in recipe and "0 error lines" in recipe
        assert "every op type's count and total agree within 1%: True" in recipe
        text = text_of(cell_starting(nb, "if HAVE_ANALYZE:"))
        assert "msprof-analyze advisor" in text and "0 error lines" in text
        theirs = re.search(r"Computing Time is ([\d.]+)ms.*Uncovered Communication Time is ([\d.]+)ms.*"
                           r"Free Time is ([\d.]+)ms", text, re.S).groups()
        ours = re.search(r"geprof: Computing ([\d.]+)ms, not overlapped communication ([\d.]+)ms, Free ([\d.]+)ms",
                         text).groups()
        assert theirs == ours


def test_advisor_notebook_findings_and_comparisons(executed):
    nb, _ = executed("08_advisor_and_compare.ipynb")
    dynamic = text_of(cell_starting(nb, "dynamic.advise()"))
    static = text_of(cell_starting(nb, "%geprof advise static"))
    assert "Host-bound" in dynamic and "Dynamic shapes change" in dynamic
    assert "Host-bound" not in static and "Dynamic shapes" not in static
    summary = text_of(cell_starting(nb, 'c = geprof_nb.compare(dynamic, static'))
    assert "A = dynamic, B = static" in summary
    mean = re.search(r"Iteration Time\(us\) mean: ([\d.]+) -> ([\d.]+)", summary)
    assert float(mean[2]) < float(mean[1]) / 2  # the static graph is more than twice as fast per step
    same = text_of(cell_starting(nb, 'shutil.rmtree("exports"'))
    diffs = re.findall(r"\(([+-]\d+\.\d+)", same)
    assert diffs and all(float(d) == 0 for d in diffs)  # a run against its own msprof export


def test_notebook_tools_schedule_explorer_plots_and_line_magic(executed):
    nb, _ = executed("09_notebook_tools.ipynb")
    assert WIDGET_VIEW in next(c for c in nb.cells if c.source == "%geprof config").outputs[0]["data"]
    assert "--hccl on --task-memory on --clock virtual" in text_of(cell_starting(nb, "%geprof config --clock"))
    schedule = text_of(cell_starting(nb, "for note in sched.notes"))
    assert "4 of 12 steps recorded (steps 4-5, 8-9" in schedule and "warmup steps 3, 7" in schedule
    assert re.findall(r"^\d+\s+(\d+)\s", schedule, re.M) == ["5", "6", "9", "10"]  # the Iteration IDs
    explorer = explorer_outputs(cell_starting(nb, "sched"))
    assert len(explorer) == 1 and "4 steps" in explorer[0]["text/plain"]
    for prefix in ("plots.step_timeline", "plots.task_gantt", "plots.op_type_bars", "plots.pipe_ratios",
                   "plots.memory_lifetimes"):
        assert any("image/png" in o.get("data", {}) for o in cell_starting(nb, prefix).outputs), prefix
    compare = text_of(cell_starting(nb, "%geprof compare sched bigger"))
    mean = re.search(r"Computing\(us\) mean: ([\d,.]+) -> ([\d,.]+)", compare)
    assert float(mean[2].replace(",", "")) > float(mean[1].replace(",", ""))  # twice the batch computes longer
    assert "reset to the built-in ones" in text_of(cell_starting(nb, "%geprof config --reset"))


def test_cluster_notebook_finds_the_injected_slow_rank_and_slow_link(executed):
    nb, _ = executed("10_cluster.ipynb")
    ranks = text_of(cell_starting(nb, "cluster.slow_ranks"))
    assert re.search(r"^0\s+3\s", ranks, re.M)  # rank 3 ranks first
    links = text_of(cell_starting(nb, "cluster.slow_links"))
    assert re.search(r"^0\s+9\s+10\s+HCCS", links, re.M) and "0.5000" in links
    advice = text_of(cell_starting(nb, "cluster.advise()"))
    assert "Slow link" in advice and "Slow rank" in advice
    shown = next(c for c in nb.cells if c.cell_type == "code" and c.source == "cluster")
    assert len(explorer_outputs(shown)) == 1
    export = text_of(cell_starting(nb, 'out = cluster.export("cluster_export")'))
    assert "16 rank directories" in export and "kernel_details.csv" in export


def _table_rows(text: str) -> list[list[str]]:
    """A printed DataFrame's data rows, split on whitespace (the header line left out)."""
    return [line.split() for line in text.strip().splitlines()[1:] if line.strip()]


def test_llm_notebook_shows_the_groups_bubbles_mfu_and_experts(executed):
    nb, _ = executed("11_llm_parallelism.ipynb")
    groups = [r[1] for r in _table_rows(text_of(cell_starting(nb, "llama.communication_groups")))]
    assert {t: groups.count(t) for t in set(groups)} == {"world": 1, "tp": 4, "pp": 4, "dp": 4}  # TP2 PP2 DP2
    # the bubbles: 1F1B's (p-1)/(m+p-1) = 20% within two points on the stage without the head's extra work;
    # the interleaved schedule's smaller on both stages
    both = text_of(cell_starting(nb, "v = 2"))
    assert "interleaved formula: 11.1%" in both
    rows = _table_rows(both.split("\n", 1)[1])  # 1F1B's stages 0 and 1, then the interleaved ones
    assert len(rows) == 4
    ratio = dict(zip([("1F1B", "0"), ("1F1B", "1"), ("interleaved", "0"), ("interleaved", "1")],
                     [float(r[-4]) for r in rows]))  # Bubble Ratio, before Ideal, Step Time and Step Share
    assert abs(ratio[("1F1B", "1")] - 0.2) <= 0.02
    assert ratio[("interleaved", "0")] < ratio[("1F1B", "0")] and ratio[("interleaved", "1")] < ratio[("1F1B", "1")]
    # MFU = model FLOPs / (step time x devices x peak), by hand from the row's own columns
    for r in _table_rows(text_of(cell_starting(nb, "llama.mfu()"))):
        step_us, flops, devices, peak_tflops, mfu = float(r[2]), float(r[5]), int(r[6]), float(r[8]), float(r[9])
        assert mfu == pytest.approx(100 * flops / (step_us * 1e-6 * devices * peak_tflops * 1e12), rel=1e-4)
        assert 35 < mfu < 60
    # expert skew 2 over 4 experts, top 2: the favourite gets the 1/top_k cap, twice the mean
    imbalance = _table_rows(text_of(cell_starting(nb, "moe.expert_imbalance")))
    assert len(imbalance) == 4 and all(float(r[6]) == 2.0 for r in imbalance)


def test_what_if_notebook_predictions_match_the_resimulation_and_the_slow_step_is_found(executed):
    nb, _ = executed("12_what_if.ipynb")
    resnet = text_of(cell_starting(nb, "%geprof whatif resnet"))
    assert resnet.startswith("What-if (Conv2D* 2x faster): mean step ") and "3 steps" in resnet
    # three changes x three steps, each predicted step against the re-simulated one: within 1 %
    check = next(c for c in nb.cells if c.cell_type == "code" and "checks[(name, " in c.source)
    errors = [float(r[-1]) for r in _table_rows(text_of(check).split("\n", 1)[1])]
    assert len(errors) == 9 and max(abs(e) for e in errors) <= 0.01
    # rank 1's 3 ms loader stall before step 4: rank 0's step 4 is the slow one, its AllReduce waited ~3 ms
    slow = _table_rows(text_of(cell_starting(nb, "rank0 = stalled.rank(0)")))
    assert [r[1] for r in slow] == ["4"]
    why = text_of(cell_starting(nb, "why = rank0.explain_step(4)"))
    top = _table_rows(why.split("\n", 1)[1])[0]
    assert top[1:3] == ["communication", "gradients/HcomAllReduce_0"] and 2.9e6 < float(top[-1]) < 3.2e6


def test_serving_notebook_curve_preemptions_and_chunked_prefill(executed):
    nb, workdir = executed("13_llm_serving.ipynb")
    served = text_of(cell_starting(nb, "%%geprof --clock virtual --no-display -o served"))
    assert "ServeResult(200 requests, 27979 output tokens in " in served and " 0 preemptions" in served
    # the curve: per TP degree, a larger batch gives more output tokens/s at a longer TPOT; TP2 beats TP1 at
    # every batch on both
    rows = _table_rows(text_of(cell_starting(nb, "def point(")))
    curve = {(int(r[1]), int(r[2])): (float(r[4]), float(r[6])) for r in rows}  # (batch, tp): (tpot p50, tokens/s)
    assert sorted(curve) == [(b, tp) for b in (8, 32, 128) for tp in (1, 2)]
    for tp in (1, 2):
        tpot, tput = zip(*(curve[b, tp] for b in (8, 32, 128)))
        assert list(tpot) == sorted(tpot) and list(tput) == sorted(tput) and tput[-1] > 2 * tput[0]
    for b in (8, 32, 128):
        assert curve[b, 2][0] < curve[b, 1][0] and curve[b, 2][1] > curve[b, 1][1]
    assert len(list(workdir.glob("sweep_b*_tp*/PROF_*"))) == 6
    # a 48-block cache preempts, counted per request and per step, and halves the throughput
    small = text_of(cell_starting(nb, "steps = small_cache.serving_steps"))
    count, steps = re.search(r"(\d+) preemptions in (\d+) steps", small).groups()
    assert int(count) >= int(steps) > 0
    table = {r[0]: (float(r[-2]), float(r[-1])) for r in _table_rows(small.split("\n", 1)[1])}
    assert table["preemptions"] == (0.0, float(count))
    assert table["output_tokens_per_s"][1] < 0.6 * table["output_tokens_per_s"][0]
    # chunked prefill: the TPOT p99 and the longest step fall, the documents' first tokens come sooner
    (before, after) = [[float(v) for v in r[2:]] for r in _table_rows(text_of(cell_starting(nb, "chats = ")))]
    tpot_p99, longest, doc_ttft = 1, 2, 4
    assert after[tpot_p99] < 0.25 * before[tpot_p99] and after[longest] < 0.1 * before[longest]
    assert after[doc_ttft] < before[doc_ttft]
