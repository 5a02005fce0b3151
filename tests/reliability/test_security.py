"""Data is data: names, messages and file contents never run as HTML, formulas, code or paths.

* Every HTML output (explorer static report and widgets, display tables, compare, advisor,
  the options panel) escapes op names, graph names, messages and imported file contents:
  the HTML is parsed and must hold no script element, no event-handler attribute and no
  image that is not our embedded PNG, while the hostile text is still shown as text.
* CSV exports neutralise spreadsheet formulas in text cells (a leading ``'``), keep numbers
  (negative ones too) as numbers, and the importers read the names back exactly.
* No ``eval``/``exec``/``pickle``/``yaml.load``/``marshal`` in the package (except the
  notebook running the user's own cell), and every ``np.load`` refuses pickles.
* File names derived from data cannot leave the directory they are written into.
"""

from __future__ import annotations

import ast
import csv
import html
import json
import os
import re
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from IPython.utils.capture import capture_output

import geprof_nb
from geprof_nb import ge
from geprof_nb.analysis.export import cells
from geprof_nb.analysis.export.naming import safe_component
from geprof_nb.analysis.sources.csvfiles import unneutralised
from geprof_nb.nb import html_parts
from geprof_nb.nb.config import ConfigStore
from geprof_nb.nb.explorer import Explorer
from geprof_nb.nb.html_parts import advice_html
from geprof_nb.nb.panel import ConfigPanel
from helpers.real_fixtures import write_ascend_pt
from helpers.reliability_helpers import profiled_ge, run_steps

pytestmark = pytest.mark.filterwarnings("ignore:Glyph .* missing from font")  # op names with TABs in plots

PACKAGE = Path(geprof_nb.__file__).resolve().parent
SCRIPT = "<script>alert(1)</script>"
IMG = "<img src=x onerror=alert(1)>"
QUOTE_BREAK = '" onmouseover="alert(1)" x="'
SINGLE_QUOTE_BREAK = "' onfocus='alert(1)' autofocus x='"
HOSTILE_NAMES = [SCRIPT, IMG, QUOTE_BREAK, SINGLE_QUOTE_BREAK, "</td></tr></table><svg onload=alert(1)>"]
FORMULAS = ["=HYPERLINK(\"http://evil\",\"x\")", "+cmd|' /C calc'!A0", "-2+3+cmd|' /C calc'!A0", "@SUM(A1:A9)",
            "\t=1+1", "'=quoted", "-1.5x"]


class _Tags(HTMLParser):
    """Every start tag with its attributes, and the text."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_startendtag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.text.append(data)


def assert_inert(page: str, must_show: list[str] = ()) -> None:
    """``page`` has no active content, and shows each of ``must_show`` as text."""
    parser = _Tags()
    parser.feed(page)
    parser.close()
    for tag, attrs in parser.tags:
        assert tag not in ("script", "iframe", "object", "embed", "svg", "math", "base", "form"), (tag, attrs)
        for name, value in attrs.items():
            assert not name.startswith("on"), (tag, name, value)
            assert name not in ("autofocus", "srcdoc", "formaction"), (tag, name)
            assert "javascript:" not in (value or "").lower(), (tag, name, value)
        if tag == "img":
            assert attrs.get("src", "").startswith("data:image/png;base64,"), attrs
    text = "".join(parser.text)
    for s in must_show:
        assert s in text, f"{s!r} is not shown as text"


def _hostile_graph(name: str = "graph <b>" + SCRIPT) -> ge.Graph:
    g = ge.Graph(name)
    x = g.data("data " + IMG, (8, 16))
    h = x
    for i, n in enumerate(HOSTILE_NAMES + FORMULAS):
        h = g.op("Relu" if i % 2 else "Gelu", h, name=n)
    g.output([h])
    return g


@pytest.fixture(scope="module")
def hostile_run(tmp_path_factory) -> geprof_nb.Profile:
    """A run whose output directory, graph name, op names and note carry HTML and formulas."""
    out = tmp_path_factory.mktemp("sec") / ("out " + SCRIPT.replace("/", "_") + QUOTE_BREAK.replace("/", "_"))
    profiled_ge(out, task_memory="on", runtime_api="on")
    sess = ge.Session()
    sess.add_graph(1, _hostile_graph())
    run_steps(sess, 1, 3)
    from geprof_nb.prof import msprof

    msprof.lib.add_note(f"a message from the run: {IMG} {QUOTE_BREAK}")
    ge.GEFinalize()
    return geprof_nb.load(out)


# ====================================================================================== HTML
def test_explorer_static_report_is_inert(hostile_run):
    page = Explorer(hostile_run, static_figures="all").static_html()
    assert_inert(page, must_show=[SCRIPT, IMG, QUOTE_BREAK, f"a message from the run: {IMG}",
                                  "model 1 (graph <b>" + SCRIPT + ")", str(hostile_run.path)])


def test_explorer_widgets_are_inert(hostile_run):
    import ipywidgets as widgets

    explorer = Explorer(hostile_run)
    pages = []

    def collect(w):
        if isinstance(w, widgets.HTML):
            pages.append(w.value)
        for child in getattr(w, "children", ()):
            collect(child)

    for title in explorer.panes:
        explorer.select(title)
    collect(explorer.widget)
    assert len(pages) > 8
    for page in pages:
        assert_inert(page)
    joined = html.unescape(" ".join(pages))
    assert SCRIPT in joined and QUOTE_BREAK in joined


def test_display_table_and_advice_are_inert():
    frame = pd.DataFrame({n: [n, 1.5] for n in HOSTILE_NAMES})
    assert_inert(html_parts.table_html(frame, title=SCRIPT), must_show=HOSTILE_NAMES)
    assert_inert(html_parts.list_html(HOSTILE_NAMES), must_show=HOSTILE_NAMES)
    assert_inert(html_parts.message_html(IMG), must_show=[IMG])
    assert_inert(html_parts.png_img_html(b"\x89PNG", alt=QUOTE_BREAK))
    findings = pd.DataFrame({"Priority": [SCRIPT, "High"], "Rule": [IMG, QUOTE_BREAK], "Finding": HOSTILE_NAMES[:2]})
    assert_inert(advice_html(findings), must_show=[SCRIPT, IMG, QUOTE_BREAK])


def test_advisor_findings_from_hostile_ops_are_inert(hostile_run):
    findings = hostile_run.advise()
    page = advice_html(findings) if len(findings) else ""
    assert_inert(page)


def test_compare_html_is_inert(hostile_run, tmp_path):
    g = _hostile_graph()
    g.name = "other " + IMG
    profiled_ge(tmp_path / "b")
    sess = ge.Session()
    sess.add_graph(1, g)
    run_steps(sess, 1, 2)
    ge.GEFinalize()
    comparison = geprof_nb.compare(hostile_run, geprof_nb.load(tmp_path / "b"), names=(SCRIPT, QUOTE_BREAK))
    assert_inert(comparison._repr_html_(), must_show=[SCRIPT, QUOTE_BREAK])


def test_imported_file_contents_are_inert(tmp_path):
    """A torch_npu directory whose kernel names, op types and trace events carry HTML."""
    run = write_ascend_pt(tmp_path)
    out = run.path / "ASCEND_PROFILER_OUTPUT"
    kd = out / "kernel_details.csv"
    text = kd.read_text()
    for i, (name, typ) in enumerate([("aclnnMm_MatMulCommon_MatMulV2", "MatMulV2"), ("aclnnAdd_AddAiCore_Add", "Add")]):
        text = text.replace(name, HOSTILE_NAMES[i].replace(",", ";")).replace(f",{typ},", f",{IMG},")
    kd.write_text(text)
    p = geprof_nb.load(run.path)
    assert SCRIPT in set(p.op_summary["Name" if "Name" in p.op_summary else "Op Name"].astype(str))
    page = Explorer(p).static_html()
    assert_inert(page, must_show=[SCRIPT, IMG])


def test_panel_messages_escape_what_was_typed():
    panel = ConfigPanel(ConfigStore())
    panel.fields["storage_limit"].value = SCRIPT
    panel.fields["output"].value = QUOTE_BREAK
    message = panel.apply_line(f"--aic-metrics {IMG.replace(' ', '')}")
    for page in (panel.messages["storage_limit"].value, panel.messages["output"].value, panel.paste_message.value,
                 panel.line_html.value):
        assert_inert(page)
    assert SCRIPT in html.unescape(panel.messages["storage_limit"].value)
    assert "is not valid" in message


def test_a_cell_error_message_is_shown_escaped(ip):
    cell = f"""
s = ge.Session(); s.add_graph(1, ge.models.mlp(batch_size=4)); s.run_graph(1)
raise ValueError({IMG!r})
"""
    with capture_output() as cap, pytest.raises(ValueError):
        ip.run_cell_magic("geprof", "--clock virtual", cell)
    page = next(o.data["text/html"] for o in cap.outputs if "text/html" in o.data)
    assert_inert(page, must_show=[f"the profiled cell raised ValueError: {IMG}"])


# ======================================================================= CSV formula injection
def test_text_cells_are_neutralised_and_numbers_stay_numbers():
    text = pd.Series(["=1+1", "+cmd", "-2+3", "@SUM(A1)", "\t=x", "\r=x", "'=x", "''+x", "-1.5", "+2", "1e-3",
                      "plain", "N/A", "-", "=", None], dtype=object)
    got = cells.column_cells(text).tolist()
    assert got == ["'=1+1", "'+cmd", "'-2+3", "'@SUM(A1)", "'\t=x", "'\r=x", "''=x", "'''+x", "-1.5", "+2", "1e-3",
                   "plain", "N/A", "'-", "'=", "N/A"]
    assert [unneutralised(c) for c in got] == ["=1+1", "+cmd", "-2+3", "@SUM(A1)", "\t=x", "\r=x", "'=x", "''+x",
                                               "-1.5", "+2", "1e-3", "plain", "N/A", "-", "=", "N/A"]
    category = pd.Series(["=cat", "-1.5", "ok"], dtype="category")
    assert cells.column_cells(category).tolist() == ["'=cat", "-1.5", "ok"]
    numbers = pd.Series([-1.5, 2.25, np.nan])
    assert cells.column_cells(numbers).tolist() == ["-1.500", "2.250", "N/A"]
    ints = pd.Series([-3, 4], dtype="Int64")
    assert cells.column_cells(ints).tolist() == ["-3", "4"]
    shapes = cells.table_cells(pd.DataFrame({"Input Shapes": ["-1,16"]}), quote=["Input Shapes"])
    assert shapes[0].tolist() == ['"-1,16"']  # a quoted cell starts with '"': left as it is


@pytest.mark.parametrize("fmt", ["msprof", "ascend_pt"])
def test_exported_csv_cells_cannot_run_as_formulas_and_import_back_exactly(hostile_run, tmp_path, fmt):
    out = hostile_run.export(tmp_path / fmt, format=fmt)
    files = sorted(out.rglob("*.csv"))
    assert files
    for path in files:
        with open(path, newline="", encoding="utf-8") as f:
            for row in csv.reader(f):
                for cell in row:
                    if cell[:1] in cells.FORMULA_START:
                        assert re.fullmatch(r"[+-]?[0-9.]+(e[+-]?[0-9]+)?", cell), (path.name, cell)
    names = set(hostile_run.op_summary["Op Name"].astype(str))
    assert set(FORMULAS) <= names
    back = geprof_nb.load(out)
    assert set(back.op_summary["Op Name"].astype(str)) == names
    durations = list(hostile_run.op_summary["Task Duration(us)"])
    assert list(back.op_summary["Task Duration(us)"]) == pytest.approx(durations, abs=0.001)


# ================================================================= no code from disk, ever
#: (file, call) pairs allowed to evaluate code: the notebook runs the user's own cell
ALLOWED_EVAL = {("nb/magics.py", "exec"), ("nb/magics.py", "eval")}
FORBIDDEN_MODULES = {"pickle", "cPickle", "dill", "shelve", "marshal", "yaml", "cloudpickle", "joblib"}


def _sources() -> list[tuple[str, ast.Module]]:
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        out.append((str(path.relative_to(PACKAGE)), ast.parse(path.read_text(encoding="utf-8"))))
    assert len(out) > 40
    return out


def test_no_eval_exec_or_unpickling_in_the_package():
    found = []
    for rel, tree in _sources():
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                names = [a.name for a in node.names] + ([node.module] if isinstance(node, ast.ImportFrom) else [])
                bad = {n.split(".")[0] for n in names if n} & FORBIDDEN_MODULES
                if bad:
                    found.append(f"{rel}:{node.lineno} imports {bad}")
            if isinstance(node, ast.Call):
                f = node.func
                name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
                if name in ("eval", "exec", "__import__", "read_pickle", "to_pickle", "load_module") \
                        and (rel, name) not in ALLOWED_EVAL:
                    found.append(f"{rel}:{node.lineno} calls {name}")
                if name == "load" and isinstance(f, ast.Attribute) and getattr(f.value, "id", "") == "np":
                    kw = {k.arg: k.value for k in node.keywords}
                    if not (isinstance(kw.get("allow_pickle"), ast.Constant) and kw["allow_pickle"].value is False):
                        found.append(f"{rel}:{node.lineno} np.load without allow_pickle=False")
                for k in node.keywords:
                    if k.arg == "allow_pickle" and not (isinstance(k.value, ast.Constant) and k.value.value is False):
                        found.append(f"{rel}:{node.lineno} allow_pickle not False")
    assert found == []


def test_the_allowed_exec_runs_only_the_users_cell():
    """magics.py compiles the cell's text through IPython (before any run opens) and runs only those code
    objects; nothing read from a file reaches exec or eval."""
    source = (PACKAGE / "nb" / "magics.py").read_text()
    calls = re.findall(r"\b(exec|eval)\((.*)\)", source)
    assert sorted((name, arg.split(",")[0]) for name, arg in calls) == [("eval", "cell.last"), ("exec", "cell.body")]
    assert re.findall(r"\b(body|value) = (?:None if last is None else )?(self\.shell\.\w+)\(", source) == \
        [("body", "self.shell.compile"), ("value", "self.shell.compile")]
    assert "return _CompiledCell(filename, body, value)" in source


# ============================================================== file names from data stay put
def _files_under(root: Path) -> set[Path]:
    return {p.resolve() for p in root.rglob("*")}


@pytest.mark.parametrize("hostile", ["../../escaped", "/tmp/absolute_escape", "..", "a\x00b", "x/../../y", "",
                                     "C:\\evil", "." * 300])
def test_names_from_data_cannot_leave_the_output_directory(hostile_run, tmp_path, hostile):
    """A Parquet manifest's run name, info.json's hostname and a worker name become file names."""
    pq = hostile_run.export(tmp_path / "pq", format="parquet")
    manifest = pq / "manifest.json"
    content = json.loads(manifest.read_text())
    content["run"] = hostile
    content.setdefault("info", {})["hostname"] = hostile
    manifest.write_text(json.dumps(content))
    p = geprof_nb.load(pq)
    # nested deep enough that a name climbing out of it (``..``, ``../../x``) still lands under tmp_path, which
    # is all that is walked (not every earlier test's directory beside it)
    target = tmp_path / "a" / "b" / "c" / "target"
    target.mkdir(parents=True)
    before = _files_under(tmp_path)
    written = [p.export(target, format="chrome"), p.export(target, format="ascend_pt"),
               p.export(target, format="ascend_pt", worker=hostile or None, rank=3),
               p.export(target, format="parquet")]
    new = _files_under(tmp_path) - before
    assert new and all(f.is_relative_to(target.resolve()) for f in new), sorted(new - {target.resolve()})
    for w in written:
        assert w.resolve().is_relative_to(target.resolve())
        assert "\x00" not in str(w)
    assert not list(tmp_path.rglob("escaped")) and not Path("/tmp/absolute_escape").exists()


def test_op_and_graph_names_never_become_paths(hostile_run, tmp_path):
    """Names like ../../etc/passwd stay inside the files' contents."""
    g = ge.Graph("../../graph_escape")
    x = g.data("../../data_escape", (4, 4))
    g.output([g.op("Relu", x, name="/tmp/op_escape_abs"), g.op("Relu", x, name="../../op_escape")])
    profiled_ge(tmp_path / "run")
    sess = ge.Session()
    sess.add_graph(1, g)
    run_steps(sess, 1, 1)
    ge.GEFinalize()
    p = geprof_nb.load(tmp_path / "run")
    target = tmp_path / "target"
    for fmt in ("msprof", "ascend_pt", "chrome", "parquet"):
        p.export(target / fmt, format=fmt)
    written = [f for f in tmp_path.rglob("*") if "escape" in f.name]
    assert written == [] and not list(Path("/tmp").glob("*_escape*")) and not (tmp_path.parent / "op_escape").exists()
    assert {"../../op_escape", "/tmp/op_escape_abs"} <= set(p.op_summary["Op Name"].astype(str))


@pytest.mark.parametrize("text, expected", [
    ("../../x", ".._.._x"), ("/abs/p", "_abs_p"), ("..", "run"), (".", "run"), ("", "run"), ("a\x00b", "a_b"),
    ("C:\\w", "C__w"), ("ok-name_1", "ok-name_1"), ("x" * 500, "x" * 120), ("名前", "名前"),
])
def test_safe_component(text, expected):
    assert safe_component(text) == expected
    assert os.sep not in safe_component(text) and "\x00" not in safe_component(text)
