"""analysis.registry: the one place that tells a path's layout and opens it (geprof_nb.load is its load)."""

from __future__ import annotations

import pytest

import geprof_nb
import geprof_nb.analysis
from geprof_nb.analysis import registry
from geprof_nb.analysis.export.parquet import export_parquet
from geprof_nb.analysis.registry import (
    ASCEND_PT,
    DAMAGED_PARQUET,
    LAYOUTS,
    MSPROF,
    MSPROF_DB,
    PARQUET,
    TORCH_NPU_DB,
    layout_of,
)
from geprof_nb.analysis.sources.ascend_pt import AscendPtSource
from geprof_nb.analysis.sources.msprof import MsprofSource
from geprof_nb.analysis.sources.parquet import ParquetSource
from helpers.real_fixtures import write_ascend_pt, write_msprof


def test_load_is_the_registry_load():
    """No second way to open a run: both public names are the registry's function."""
    assert geprof_nb.load is registry.load and geprof_nb.analysis.load is registry.load


def test_the_layouts_in_the_order_they_are_tried():
    assert LAYOUTS == (PARQUET, TORCH_NPU_DB, ASCEND_PT, MSPROF_DB, MSPROF, DAMAGED_PARQUET)
    assert [layout.name for layout in LAYOUTS] == ["parquet", "db", "ascend_pt", "msprof_db", "msprof", "parquet"]


def test_each_layout_is_told_from_its_directory(tmp_path):
    msprof = write_msprof(tmp_path / "msprof")
    torch_npu = write_ascend_pt(tmp_path / "torch_npu")
    export = export_parquet(geprof_nb.load(msprof.path), tmp_path / "parquet")
    damaged = tmp_path / "damaged"
    damaged.mkdir()
    (damaged / "manifest.json").write_text("{", encoding="utf-8")
    (tmp_path / "file.txt").write_text("not a run", encoding="utf-8")
    assert layout_of(msprof.path) is MSPROF and layout_of(msprof.output) is MSPROF
    assert layout_of(torch_npu.path) is ASCEND_PT and layout_of(torch_npu.path / "ASCEND_PROFILER_OUTPUT") is ASCEND_PT
    assert layout_of(export) is PARQUET
    assert layout_of(damaged) is DAMAGED_PARQUET
    assert layout_of(tmp_path / "file.txt") is None and layout_of(tmp_path) is None


def test_an_earlier_layout_wins(tmp_path):
    """A torch_npu directory with an unreadable manifest.json beside it is read as torch_npu: the damaged
    Parquet layout is tried last."""
    torch_npu = write_ascend_pt(tmp_path)
    (torch_npu.path / "manifest.json").write_text("{", encoding="utf-8")
    assert layout_of(torch_npu.path) is ASCEND_PT
    assert isinstance(geprof_nb.load(torch_npu.path).source, AscendPtSource)


def test_each_layout_opens_with_its_source(tmp_path):
    msprof = write_msprof(tmp_path / "msprof", device_id=3)
    torch_npu = write_ascend_pt(tmp_path / "torch_npu", rank=1)
    opened = {name: geprof_nb.load(path) for name, path in
              (("msprof", msprof.path), ("ascend_pt", torch_npu.path))}
    opened["parquet"] = geprof_nb.load(export_parquet(opened["msprof"], tmp_path / "parquet"))
    assert isinstance(opened["msprof"].source, MsprofSource) and opened["msprof"].device_id == 3
    assert isinstance(opened["ascend_pt"].source, AscendPtSource) and opened["ascend_pt"].device_id == 1
    assert isinstance(opened["parquet"].source, ParquetSource) and opened["parquet"].device_id == 3
    with pytest.raises(ValueError, match="device_id 0 is not in .*; its devices are 3"):
        geprof_nb.load(msprof.path, device_id=0)
