"""The docs: generated references equal to what the parsers say, a README that stays short, no dead links."""

import importlib.util
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
DOCS = REPO / "docs"
REGENERATE = "python docs/generate_reference.py"


def _generator():
    spec = importlib.util.spec_from_file_location("generate_reference", DOCS / "generate_reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def generated() -> dict[Path, str]:
    return _generator().rendered()


def test_generated_references_are_up_to_date(generated):
    """docs/reference/flags.md and cli.md are what the magic's and the CLI's parsers say."""
    assert {p.relative_to(REPO).as_posix() for p in generated} == {"docs/reference/flags.md", "docs/reference/cli.md"}
    for path, text in generated.items():
        committed = path.read_text(encoding="utf-8") if path.exists() else ""
        assert committed == text, f"{path.relative_to(REPO)} is out of date: run `{REGENERATE}` and commit it"


def test_check_mode_reports_a_stale_reference_and_writes_nothing(tmp_path, monkeypatch, capsys):
    gen = _generator()
    stale = tmp_path / "flags.md"
    stale.write_text("old\n", encoding="utf-8")
    monkeypatch.setattr(gen, "rendered", lambda: {stale: "new\n"})
    monkeypatch.setattr(gen, "DOCS", tmp_path / "docs")
    assert gen.main(["--check"]) == 1
    assert stale.read_text(encoding="utf-8") == "old\n"
    assert "out of date: flags.md" in capsys.readouterr().out
    assert gen.main([]) == 0 and stale.read_text(encoding="utf-8") == "new\n"
    assert gen.main(["--check"]) == 0


def _table_rows(text: str, flag: str) -> list[str]:
    """The rows of the Markdown tables in ``text`` whose first cell is ``flag``."""
    return [line for line in text.splitlines() if line.startswith(f"| `{flag}`")]


def test_flag_reference_has_one_row_per_flag_with_its_field_and_default(generated):
    from geprof_nb.nb.config import FLAG_OF, PROFILING_FIELDS

    text = generated[DOCS / "reference" / "flags.md"].split("## `%geprof`\n", 1)[0]
    for field, flag in FLAG_OF.items():
        rows = _table_rows(text, flag)
        assert len(rows) == 1, flag
        if field in PROFILING_FIELDS:
            assert f"| `{field}` |" in rows[0], flag  # the profilingOptions field it sets
        assert "default" in rows[0], flag  # every flag states its default
    for flag in ("-o", "--no-display"):
        assert len(_table_rows(text, flag)) == 1
    (aic,) = _table_rows(text, "--aic-metrics")
    assert "or Custom:0x49,0x8,... (up to 8 PMU event ids in [0x1, 0x6E])" in aic
    assert "L2Cache and MemoryAccess need an A2-class chip (Ascend910B)" in aic
    (ranks,) = _table_rows(text, "--ranks")
    assert "ge.exec.rankSize" in ranks and "world\\_size=N" not in ranks and "world_size=N" in ranks
    assert "| `on` \\| `off` \\| `l0` \\| `l1` |" in _table_rows(text, "--task-trace")[0]
    assert "`v1` \\| `v2`" in _table_rows(text, "--executor")[0]
    assert "::" not in text  # reST literal-block markers became fenced code blocks
    examples = text.split("Examples:\n\n```text\n", 1)[1].split("\n```", 1)[0]
    assert examples.startswith("%%geprof --aic-metrics PipeUtilization --training-trace on\nsess = ge.Session()")
    assert "\n%%geprof --skip-first 10 --wait 1 --warmup 1 --active 3 --repeat 2 --clock virtual -o sched" in examples


def test_cli_reference_has_every_subcommand_and_flag(generated):
    from geprof_nb.cli import build_parser

    text = generated[DOCS / "reference" / "cli.md"]
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    for name, parser in sub.choices.items():
        section = text.split(f"## `geprof {name}`\n", 1)[1].split("\n## ", 1)[0]
        for action in parser._actions:
            for flag in action.option_strings:
                if flag not in ("-h", "--help"):
                    assert len(_table_rows(section, flag)) == 1, (name, flag)
    assert "Run SCRIPT as \\_\\_main\\_\\_" in text  # not bold "main"
    assert "| `--format` | `msprof` \\| `ascend_pt` \\| `chrome` \\| `parquet` \\| `db` \\| `msprof_db` |" in text


def test_escaping_keeps_help_prose_literal():
    gen = _generator()
    assert gen._escaped("under CLUSTER_*/rank_<r>/ and `a_*<b>` task_time _geprof") == \
        "under CLUSTER\\_\\*/rank\\_&lt;r&gt;/ and `a_*<b>` task_time \\_geprof"
    assert gen._markdown_text("Examples::\n\n  %%geprof --active 3\n  x = 1\n\nAfter ``code``.") == \
        "Examples:\n\n```text\n%%geprof --active 3\nx = 1\n```\n\nAfter `code`."


def test_readme_starts_with_the_two_set_up_commands_and_stays_short():
    text = README.read_text(encoding="utf-8")
    size = len(text.encode("utf-8"))
    assert size < 15_000, f"README.md is {size:,} bytes; keep it under 15,000 (details go to docs/)"
    blocks = re.findall(r"```bash\n(.*?)\n```", text, re.S)
    assert blocks[:2] == [
        'python3 -m venv .venv && . .venv/bin/activate && pip install -e . && geprof demo',
        'python3 -m venv .venv && . .venv/bin/activate && pip install -e ".[test,interop,cluster]" && python -m pytest',
    ]
    assert text.index(blocks[1]) < text.index("![")  # the commands come before anything else shown
    assert "DESIGN.md" not in text  # no link out of the repository


def _markdown_files() -> list[Path]:
    return [README, *sorted(DOCS.rglob("*.md")), *sorted((REPO / "benchmarks").glob("*.md"))]


#: ``[text](target)`` and ``![alt](target)``, outside code.
_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def _links(path: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.S)
    text = re.sub(r"`[^`\n]*`", "", text)
    return _LINK.findall(text)


def _anchors(path: Path) -> set[str]:
    """GitHub's anchors of the headings of ``path``."""
    text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.S)
    out: set[str] = set()
    for heading in re.findall(r"^#+ (.+)$", text, re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        n = sum(1 for a in out if a == slug or re.fullmatch(re.escape(slug) + r"-\d+", a))
        out.add(f"{slug}-{n}" if n else slug)  # a repeated heading is slug-1, slug-2, ...
    return out


def test_every_relative_link_points_at_a_file_that_exists():
    files = _markdown_files()
    assert len(files) > 10  # README, the docs pages, benchmarks/README.md
    dead = []
    for path in files:
        for target in _links(path):
            if re.match(r"[a-z]+:", target):  # https:, mailto:
                continue
            file_part, _, anchor = target.partition("#")
            linked = (path.parent / file_part).resolve() if file_part else path
            if not linked.exists():
                dead.append(f"{path.relative_to(REPO)}: {target}")
            elif REPO not in linked.parents and linked != REPO:
                dead.append(f"{path.relative_to(REPO)}: {target} (outside the repository)")
            elif anchor and linked.suffix == ".md" and anchor not in _anchors(linked):
                dead.append(f"{path.relative_to(REPO)}: {target} (no such heading)")
    assert not dead, "dead links:\n" + "\n".join(dead)


def test_every_docs_page_is_reachable_from_the_index():
    linked = {(DOCS / t.partition("#")[0]).resolve() for t in _links(DOCS / "index.md")}
    pages = {p.resolve() for p in DOCS.rglob("*.md")} - {(DOCS / "index.md").resolve()}
    assert not pages - linked, sorted(p.relative_to(DOCS).as_posix() for p in pages - linked)


def test_the_tab_maps_say_what_each_explorer_tab_shows():
    """docs/guide/explorer.md has a row per tab in the explorer's order, the README names them in that order, and
    each piece is where the explorer puts it: the step selector in Timeline, the step chart in Summary."""
    from geprof_nb.nb import explorer

    text = (DOCS / "guide" / "explorer.md").read_text(encoding="utf-8")
    rows = dict(re.findall(r"^\| \*\*([^*]+)\*\* \| (.*) \|$", text, re.M))
    assert list(rows) == list(explorer.TAB_TITLES)
    assert [t for t, row in rows.items() if "step selector" in row] == ["Timeline"]
    assert [t for t, row in rows.items() if "step chart" in row] == ["Summary"]
    assert [t for t, row in rows.items() if "ids/constant" in row] == ["Ops"]
    readme = README.read_text(encoding="utf-8")
    # the README names the tabs every run's output shows (What-if, interactive only, is in the guide's table)
    static = [pane.title for pane in explorer.PANES if pane.static and pane.title in explorer.TAB_TITLES]
    named = re.findall(r"\*\*(" + "|".join(map(re.escape, explorer.TAB_TITLES)) + r")\*\*", readme)
    assert named == static
    summary = readme.split("**Summary**", 1)[1].split("**Ops**", 1)[0]
    assert "stacked bar per step" in summary and "step selector" not in summary
