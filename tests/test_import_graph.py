"""The import graph of geprof_nb, read from the source with ``ast``: no cycle, no import of another module's
private name, and the dependency rules (analysis/ never imports ge/ or nb/; ge/ never imports nb/; the rooms of
analysis/ are layers, each importing only the layers below it).

Every import counts, those inside functions too (a lazy import still runs), relative ones resolved; only
those under ``if TYPE_CHECKING:`` do not (they never run).  ``import a.b`` and ``from a import b`` with a
module ``a.b`` are edges to ``a.b``; ``from a import name`` of anything else is an edge to ``a``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "geprof_nb"

#: analysis/'s rooms, lowest first: a module imports modules of its own room and of the layers below only
#: ("" is the package itself, geprof_nb.analysis; rooms of one layer do not import each other).
ANALYSIS_LAYERS = (
    ("files",),  # what is where a data file should be, and reading it
    ("rundir", "arguments"),  # the run directory reader and the argument checks
    ("tables",),  # records -> tables
    ("sources",),  # where a Profile's tables come from
    ("timing",),  # why a step is this long (the dependency graph, the critical path, what-if)
    ("findings", "export"),  # what the tables say (a finding's time at stake is a what-if), the real tools' formats
    ("profile",),  # the Profile facade (its advise and export call the layer below)
    ("cluster",),  # several ranks
    ("registry", "compare"),  # opening a path; comparing two runs
    ("",),
)


def _modules(root: Path = ROOT / PACKAGE) -> dict[str, Path]:
    """Dotted name -> file of every module of the package (a package is its ``__init__.py``)."""
    out = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(node: ast.AST):
    """Every import statement under ``node`` that runs: all of them but those in the body of an
    ``if TYPE_CHECKING:`` (its ``else`` runs)."""
    for child in ast.iter_child_nodes(node):
        runs = child.orelse if isinstance(child, ast.If) and _is_type_checking(child.test) else [child]
        for statement in runs:
            if isinstance(statement, (ast.Import, ast.ImportFrom)):
                yield statement
            else:
                yield from _imports(statement)


def _absolute(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    """The module a ``from`` import names, relative ones resolved from ``module``."""
    if not node.level:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[:len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


class ImportGraph:
    """The package's modules, the modules each imports, and the private names each imports from another."""

    def __init__(self, root: Path = ROOT / PACKAGE) -> None:
        self.modules = _modules(root)
        self.edges: dict[str, set[str]] = {m: set() for m in self.modules}
        self.private: set[tuple[str, str, str]] = set()
        for module, path in self.modules.items():
            is_package = path.name == "__init__.py"
            for node in _imports(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Import):
                    self._add(module, [a.name for a in node.names])
                    continue
                source = _absolute(module, is_package, node)
                targets = []
                for alias in node.names:
                    sub = f"{source}.{alias.name}"
                    targets.append(sub if sub in self.modules else source)
                    if alias.name.startswith("_") and not alias.name.startswith("__") and sub not in self.modules \
                            and source.startswith(PACKAGE):
                        self.private.add((module, source, alias.name))
                self._add(module, targets)

    def _add(self, module: str, targets: list[str]) -> None:
        for target in targets:
            if target in self.modules and target != module:
                self.edges[module].add(target)

    def components(self) -> list[set[str]]:
        """The strongly connected components of more than one module (the import cycles), by Tarjan's
        algorithm."""
        index: dict[str, int] = {}
        low: dict[str, int] = {}
        stack: list[str] = []
        on_stack: set[str] = set()
        components: list[set[str]] = []

        def strong(v: str) -> None:
            index[v] = low[v] = len(index)
            stack.append(v)
            on_stack.add(v)
            for w in sorted(self.edges[v]):
                if w not in index:
                    strong(w)
                    low[v] = min(low[v], low[w])
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
            if low[v] == index[v]:
                component = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    component.append(w)
                    if w == v:
                        break
                if len(component) > 1:
                    components.append(set(component))

        for v in sorted(self.modules):
            if v not in index:
                strong(v)
        return components

    def cycle_in(self, component: set[str]) -> list[str]:
        """One cycle through the first module of a strongly connected component (``[a, b, c, a]``)."""
        start = min(component)
        paths = {start: [start]}
        frontier = [start]
        while frontier:  # breadth first inside the component: the shortest way back to ``start``
            nxt = []
            for v in frontier:
                for w in sorted(self.edges[v] & component):
                    if w == start:
                        return paths[v] + [start]
                    if w not in paths:
                        paths[w] = paths[v] + [w]
                        nxt.append(w)
            frontier = nxt
        raise AssertionError(f"{sorted(component)} is not strongly connected")

    def reachable(self, module: str) -> dict[str, list[str]]:
        """Every module that importing ``module`` can import, with the chain of imports that gets there."""
        paths = {module: [module]}
        frontier = [module]
        while frontier:
            nxt = []
            for v in frontier:
                for w in sorted(self.edges[v]):
                    if w not in paths:
                        paths[w] = paths[v] + [w]
                        nxt.append(w)
            frontier = nxt
        return paths


@pytest.fixture(scope="module")
def graph() -> ImportGraph:
    return ImportGraph()


def _under(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def _shown(graph: ImportGraph, components: list[set[str]]) -> str:
    """Each import cycle as one path through it (``nb.display -> nb.explorer -> nb.display``) and its modules."""
    lines = []
    for component in components:
        path = " -> ".join(m.removeprefix("geprof_nb.") for m in graph.cycle_in(component))
        lines.append(f"{path}  (modules: {', '.join(sorted(component))})")
    return "\n".join(lines)


# ------------------------------------------------------------------------------------- the graph builder
def test_the_builder_resolves_relative_lazy_and_type_checking_imports(tmp_path):
    """On a package written here: relative imports resolved from a module and from a package, a lazy import
    counted, one under TYPE_CHECKING not (its else branch is), ``from pkg import name`` an edge to pkg, and
    a cycle found with its path."""
    pkg = tmp_path / PACKAGE
    (pkg / "sub").mkdir(parents=True)
    files = {
        "__init__.py": "from .a import A\n",
        "a.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .b import B\nelse:\n"
                "    from . import c\nA = 1\n",
        "b.py": "def f():\n    from .sub import d\n    from .sub.d import _hidden\n",
        "c.py": "import geprof_nb.sub.d\n",
        "sub/__init__.py": "from .. import b\n",
        "sub/d.py": "from ..a import A\n_hidden = 1\n",
    }
    for name, text in files.items():
        (pkg / name).write_text(text, encoding="utf-8")
    g = ImportGraph(pkg)
    assert g.edges == {
        "geprof_nb": {"geprof_nb.a"}, "geprof_nb.a": {"geprof_nb.c"}, "geprof_nb.b": {"geprof_nb.sub.d"},
        "geprof_nb.c": {"geprof_nb.sub.d"}, "geprof_nb.sub": {"geprof_nb.b"}, "geprof_nb.sub.d": {"geprof_nb.a"}}
    assert g.private == {("geprof_nb.b", "geprof_nb.sub.d", "_hidden")}
    assert g.components() == [{"geprof_nb.a", "geprof_nb.c", "geprof_nb.sub.d"}]
    assert g.cycle_in(g.components()[0]) == ["geprof_nb.a", "geprof_nb.c", "geprof_nb.sub.d", "geprof_nb.a"]
    assert g.reachable("geprof_nb.b")["geprof_nb.c"] == ["geprof_nb.b", "geprof_nb.sub.d", "geprof_nb.a",
                                                         "geprof_nb.c"]


# --------------------------------------------------------------------------------------------- cycles
def test_the_package_has_no_import_cycle(graph):
    cycles = graph.components()
    assert not cycles, f"import cycles:\n{_shown(graph, cycles)}"


# ------------------------------------------------------------------------------------ private names
def test_the_package_imports_no_private_name_of_another_module(graph):
    assert not graph.private, f"private names imported: {sorted(graph.private)}"


# ---------------------------------------------------------------------------------- dependency rules
def _room(module: str) -> str:
    """The room of an analysis module: its first name below geprof_nb.analysis ("" for the package)."""
    return module.removeprefix("geprof_nb.analysis").lstrip(".").split(".")[0]


def test_every_analysis_module_is_in_a_layer(graph):
    rooms = {_room(m) for m in graph.modules if _under(m, "geprof_nb.analysis")}
    assert rooms == {room for layer in ANALYSIS_LAYERS for room in layer}


def test_the_analysis_rooms_import_only_their_own_and_the_layers_below(graph):
    layer = {room: k for k, rooms in enumerate(ANALYSIS_LAYERS) for room in rooms}
    bad = [f"{a} -> {b}" for a in sorted(graph.modules) if _under(a, "geprof_nb.analysis")
           for b in sorted(graph.edges[a]) if _under(b, "geprof_nb.analysis")
           and _room(a) != _room(b) and layer[_room(b)] >= layer[_room(a)]]
    assert not bad, "imports against the layers of analysis/:\n" + "\n".join(bad)



@pytest.mark.parametrize("package, forbidden", [
    ("geprof_nb.analysis", ("geprof_nb.ge", "geprof_nb.nb")),
    ("geprof_nb.ge", ("geprof_nb.nb",)),
])
def test_a_package_never_imports_what_it_must_not(graph, package, forbidden):
    """Not directly and not through another module: every chain of imports from ``package``'s modules."""
    bad = []
    for module in (m for m in graph.modules if _under(m, package)):
        for target, chain in graph.reachable(module).items():
            if any(_under(target, f) for f in forbidden):
                bad.append(" -> ".join(chain))
    assert not bad, f"{package} reaches {', '.join(forbidden)}:\n" + "\n".join(sorted(bad)[:10])
