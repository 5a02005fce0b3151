"""Shared fixtures for the non-notebook test suites (tests/ge, tests/prof, tests/analysis).

* ``_ge_finalize`` (autouse): ``ge.GEFinalize()`` after every test, so GE and
  msprof state never leak from one test into the next; model ids start at 1
  in every test, as in a new process (GE never reuses one within a process).
* ``run_profiled``: a factory that runs a profiled session on the virtual clock
  into a directory and returns a :class:`ProfiledRun` (the loaded Profile plus
  the compiled model's task table, captured before ``GEFinalize`` unloads it).
* ``resnet_run`` / ``resnet_run_ws1`` / ``mlp_910a_run``: session-scoped runs
  shared by the read-only analysis tests (cheap: small batch and image size).
* ``tiny_graph``: a factory for a hand-built training graph with a known
  structure (used by the FP/BP auto-detection tests).

The helpers themselves live in ``tests/helpers/geprof_testing.py``.
"""

from __future__ import annotations

from typing import Any, Callable

import pytest

from geprof_nb import ge
from geprof_nb.ge.runtime import MODEL_IDS
from geprof_nb.ge.session import is_initialized
from geprof_nb.prof import msprof
from helpers.geprof_testing import ProfiledRun, build_tiny_graph, run_profiled_session, small_resnet

__all__ = ["ProfiledRun", "build_tiny_graph", "run_profiled_session", "small_resnet"]


@pytest.fixture(autouse=True)
def _ge_finalize():
    """Never let GE (or a collection it started) leak into the next test; each test is a new process to
    the model ids (restarted after the session fixtures it uses have loaded theirs, and after it)."""
    MODEL_IDS.restart()
    yield
    if is_initialized():
        ge.GEFinalize()
    if msprof.lib.running:  # a test drove msprof directly and failed half-way
        msprof.lib.finalize(status="aborted")
    MODEL_IDS.restart()


@pytest.fixture
def run_profiled(tmp_path) -> Callable[..., ProfiledRun]:
    """``run_profiled(graph, steps=3, subdir="prof", **options)`` -> ProfiledRun in tmp_path/subdir."""

    def run(graph: Any, steps: int = 3, subdir: str = "prof", **kwargs: Any) -> ProfiledRun:
        return run_profiled_session(tmp_path / subdir, graph, steps, **kwargs)

    return run


@pytest.fixture(scope="session")
def resnet_run(tmp_path_factory) -> ProfiledRun:
    """ResNet-50 (batch 2, 64x64), 8 ranks (gradient AllReduce buckets), Ascend910B, 3 steps."""
    return run_profiled_session(tmp_path_factory.mktemp("resnet_ws8"), small_resnet(8), 3)


@pytest.fixture(scope="session")
def resnet_run_ws1(tmp_path_factory) -> ProfiledRun:
    """The same ResNet-50 on one rank: no AllReduce."""
    return run_profiled_session(tmp_path_factory.mktemp("resnet_ws1"), small_resnet(1), 3)


@pytest.fixture(scope="session")
def mlp_910a_run(tmp_path_factory) -> ProfiledRun:
    """A small MLP on Ascend910A (no vector cores, non-Stars PMU columns)."""
    g = ge.models.mlp(batch_size=8, hidden=(64, 32), world_size=2)
    return run_profiled_session(tmp_path_factory.mktemp("mlp_910a"), g, 3, device="Ascend910A")


@pytest.fixture
def tiny_graph() -> Callable[..., tuple]:
    return build_tiny_graph
