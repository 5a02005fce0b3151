"""geprof_nb.errors: the documented error types in one leaf module, importable where users import them."""

from __future__ import annotations

import ast
from pathlib import Path

import geprof_nb.analysis
from geprof_nb import errors
from geprof_nb.errors import ImportFormatError, RunDirError

ROOT = Path(__file__).resolve().parents[1]


def test_the_errors_module_imports_nothing_of_the_package():
    """A leaf: any module may import it without pulling in a reader or the runtime."""
    tree = ast.parse((ROOT / "geprof_nb" / "errors.py").read_text(encoding="utf-8"))
    imports = [ast.unparse(n) for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]
    assert imports == []


def test_an_import_format_error_is_a_run_dir_error_and_a_value_error():
    assert issubclass(ImportFormatError, RunDirError) and issubclass(RunDirError, ValueError)
    assert errors.__all__ == ["ImportFormatError", "RunDirError", "ServingError"]
    assert issubclass(errors.ServingError, ValueError)


def test_the_public_paths_name_the_same_classes():
    """``geprof_nb.analysis`` exports both (what ``except geprof_nb.analysis.ImportFormatError`` catches)."""
    assert geprof_nb.analysis.ImportFormatError is ImportFormatError
    assert geprof_nb.analysis.RunDirError is RunDirError
    assert {"ImportFormatError", "RunDirError"} <= set(geprof_nb.analysis.__all__)
