"""Parquet export and its Source: a round trip gives equal tables, exact times and the run's identity."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import geprof_nb
from geprof_nb.analysis import Profile
from geprof_nb.analysis.export.parquet import TABLES, export_parquet
from geprof_nb.analysis.sources.parquet import ParquetSource
from geprof_nb.analysis.sources.source import TIMESTAMP_COLUMNS, Source
from geprof_nb.analysis.tables import summary
from geprof_nb.errors import ImportFormatError
from helpers.geprof_testing import build_tiny_graph, run_profiled_session
from helpers.real_fixtures import write_ascend_pt, write_msprof


def assert_same_profile(p: Profile, q: Profile) -> None:
    for name in TABLES:
        pd.testing.assert_frame_equal(getattr(p, name), getattr(q, name), check_exact=True, obj=name)
    a, b = p.source.op_rows(), q.source.op_rows()
    for field in ("iteration", "start_ns", "connection_id"):
        assert np.array_equal(getattr(a, field), getattr(b, field)), field
        assert getattr(b, field).dtype == np.int64
    for name in TIMESTAMP_COLUMNS:
        pd.testing.assert_frame_equal(p.source.times_ns(name, getattr(p, name)),
                                      q.source.times_ns(name, getattr(q, name)), obj=f"{name} times")
    pd.testing.assert_frame_equal(p.source.step_bounds().astype(np.int64), q.source.step_bounds())
    assert np.array_equal(p.source.communication_rows(), q.source.communication_rows())
    assert (q.name, q.info, q.device, q.options, q.notes, q.dropped, q.complete, q.device_id, q.memory_peak) == (
        p.name, p.info, p.device, p.options, p.notes, p.dropped, p.complete, p.device_id, p.memory_peak)


@pytest.fixture(scope="module")
def memory_run(tmp_path_factory):
    """A small run with every optional table: memory, msproftx markers, HCCL."""
    out = tmp_path_factory.mktemp("memory_run")
    return run_profiled_session(out, build_tiny_graph(world_size=2)[0], 3, task_memory="on", msproftx="on")


def test_round_trip_of_a_geprof_run(resnet_run, tmp_path):
    p = resnet_run.profile
    out = export_parquet(p, tmp_path)
    assert out == tmp_path / f"{p.name}.geprof_parquet" and (out / "manifest.json").is_file()
    q = geprof_nb.load(out)
    assert isinstance(q.source, ParquetSource) and q.path == out
    assert_same_profile(p, q)
    st = q.step_trace
    assert list(st.columns).count("Reduce Start(us)") == list(p.step_trace.columns).count("Reduce Start(us)") > 1
    assert q.op_summary["Op Name"].cat.categories.dtype == object
    assert repr(q) == repr(p)


def test_round_trip_with_memory_and_markers(memory_run, tmp_path):
    p = memory_run.profile
    assert len(p.operator_memory) and len(p.memory_record) and p.memory_peak is not None
    q = geprof_nb.load(export_parquet(p, tmp_path))
    assert_same_profile(p, q)
    assert q.memory_peak == p.memory_peak


def test_task_trace_l0_keeps_which_rows_are_collectives(tmp_path):
    """At l0 op_summary's Task Type is N/A: the collectives come from the HCCL task track, which
    the export carries as op_rows' ``communication`` column."""
    p = run_profiled_session(tmp_path / "run", build_tiny_graph(world_size=2)[0], 3, task_trace="l0",
                             hccl="on").profile
    comm = p.source.communication_rows()
    assert p.source.task_level == "l0"
    assert p.op_summary["Op Name"][comm].tolist() == ["gradients/HcomAllReduce_0"] * 3  # one per step
    q = geprof_nb.load(export_parquet(p, tmp_path / "x"))
    assert np.array_equal(q.source.communication_rows(), comm)
    pd.testing.assert_frame_equal(q.communication_statistic, p.communication_statistic)
    # the same findings (read back, the run is imported: its findings keep the rules' estimates, not what-ifs)
    key = ["Rule", "Finding", "Suggestion"]
    pd.testing.assert_frame_equal(q.advise().sort_values("Rule")[key].reset_index(drop=True),
                                  p.advise().sort_values("Rule")[key].reset_index(drop=True))


def test_an_export_without_the_communication_column_reads_task_type(memory_run, tmp_path):
    """Exports written before op_rows had the ``communication`` column fall back to op_summary's Task Type."""
    p = memory_run.profile
    out = export_parquet(p, tmp_path)
    rows = pd.read_parquet(out / "op_rows.parquet").drop(columns="communication")
    rows.to_parquet(out / "op_rows.parquet")
    manifest = json.loads((out / "manifest.json").read_text())
    entry = manifest["tables"]["op_rows"]
    keep = [i for i, c in enumerate(entry["columns"]) if c != "communication"]
    entry["columns"], entry["dtypes"] = [entry["columns"][i] for i in keep], [entry["dtypes"][i] for i in keep]
    (out / "manifest.json").write_text(json.dumps(manifest))
    comm = geprof_nb.load(out).source.communication_rows()
    assert comm.sum() > 0 and np.array_equal(comm, p.source.communication_rows())


def test_only_non_empty_tables_have_files(memory_run, tmp_path):
    p = memory_run.profile
    out = export_parquet(p, tmp_path)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["format"] == "geprof_parquet" and manifest["version"] == 1 and manifest["run"] == p.name
    assert manifest["device_id"] == 0 and manifest["device"] == p.device and manifest["notes"] == p.notes
    files = {f.name for f in out.glob("*.parquet")}
    for name in TABLES:
        frame = getattr(p, name)
        assert (f"{name}.parquet" in files) == (len(frame) > 0), name
    assert {"op_rows.parquet", "step_bounds.parquet", "step_trace.times.parquet"} <= files
    assert p.hccl_tasks.empty and manifest["tables"]["hccl_tasks"]["file"] is None
    q = geprof_nb.load(out)
    pd.testing.assert_frame_equal(q.hccl_tasks, p.hccl_tasks)  # dtypes of the empty table kept


def test_duplicate_columns_are_renamed_on_disk(resnet_run, tmp_path):
    out = export_parquet(resnet_run.profile, tmp_path)
    on_disk = pd.read_parquet(out / "step_trace.parquet").columns.tolist()
    assert "Reduce Start(us) #2" in on_disk and len(set(on_disk)) == len(on_disk)


def test_round_trip_of_imported_data(tmp_path):
    msprof = geprof_nb.load(write_msprof(tmp_path / "m", extra_late=True, stale_export=True).path)
    q = geprof_nb.load(export_parquet(msprof, tmp_path / "out"))
    assert_same_profile(msprof, q)
    assert len(q.notes) == 2
    pt = geprof_nb.load(write_ascend_pt(tmp_path / "a").path)
    q = geprof_nb.load(export_parquet(pt, tmp_path / "out"))
    assert_same_profile(pt, q)
    pd.testing.assert_frame_equal(q.source.step_breakdown_table(), pt.step_breakdown)


def test_a_device_the_export_does_not_have_is_refused_naming_device_id(tmp_path):
    out = export_parquet(geprof_nb.load(write_msprof(tmp_path / "m", device_id=3).path), tmp_path / "out")
    with pytest.raises(ValueError) as err:
        geprof_nb.load(out, device_id=0)
    assert str(err.value) == f"device_id 0 is not in {out.resolve()}; its devices are 3"
    assert geprof_nb.load(out, device_id=3).device_id == 3


def test_profile_export_and_overwrite(memory_run, tmp_path):
    p = memory_run.profile
    out = p.export(tmp_path, format="parquet", compression="zstd")
    assert out.name.endswith(".geprof_parquet")
    with pytest.raises(FileExistsError, match="overwrite=True"):
        export_parquet(p, tmp_path)
    assert export_parquet(p, tmp_path, overwrite=True) == out
    assert not list(tmp_path.glob(".*.tmp"))
    assert geprof_nb.load(tmp_path).path == out  # a directory holding one export
    (tmp_path / "other.geprof_parquet").mkdir()
    with pytest.raises(FileExistsError, match="not a geprof Parquet export"):
        export_parquet(_renamed(p, "other"), tmp_path, overwrite=True)


def labels_as_objects(frame: pd.DataFrame) -> pd.DataFrame:
    out = frame.copy()
    for i in range(out.shape[1]):
        column = out.iloc[:, i]
        if isinstance(column.dtype, pd.CategoricalDtype):
            out.isetitem(i, column.cat.set_categories(column.cat.categories.astype(object)))
    return out


@pytest.mark.parametrize("name", ["run.geprof_parquet", "renamed"])
@pytest.mark.parametrize("damage", ["{", '{"format": "geprof_parquet", "format": "other"}', "[" * 2000 + "]" * 2000])
def test_an_export_whose_manifest_cannot_be_read_loses_only_what_the_manifest_held(memory_run, tmp_path, name,
                                                                                    damage):
    """The tables are in the Parquet files: every row, column (step_trace's repeated Reduce pairs too) and
    dtype comes back from them; the note names the manifest and its problem and what was lost with it."""
    p = memory_run.profile
    out = export_parquet(p, tmp_path / "exp").rename(tmp_path / name)
    manifest = out / "manifest.json"
    manifest.write_text(damage)
    for path in (out, tmp_path):  # the export, and a directory holding it
        q = geprof_nb.load(path)
        for table in TABLES:
            if len(getattr(p, table)):  # the dtype of category labels (str or object) is the manifest's
                pd.testing.assert_frame_equal(labels_as_objects(getattr(p, table)), getattr(q, table),
                                              check_exact=True, obj=table)
            else:  # no file: its columns are the Source's, their dtypes the manifest's only
                assert len(getattr(q, table)) == 0 and list(getattr(q, table).columns) == list(getattr(p, table).columns)
        assert np.array_equal(p.source.op_rows().start_ns, q.source.op_rows().start_ns)
        files = len(list(out.glob("*.parquet")))
        note = next(n for n in q.notes if n.startswith(f"{manifest}: not valid JSON ("))
        assert note.endswith(f": the export's {files} tables are read from their Parquet files; lost with the "
                             "manifest: the run's name, description (info, options, device), notes, dropped counts and "
                             "memory peak, and some dtypes (of tables without rows, which have no file, and of category "
                             "labels); every row and column of the tables is read")
        assert q.name == name.removesuffix(".geprof_parquet") and q.memory_peak is None and q.info == {}


def test_an_unreadable_manifest_without_the_tables_is_still_an_error_naming_it(tmp_path):
    out = tmp_path / "x.geprof_parquet"
    out.mkdir()
    (out / "manifest.json").write_text("{")
    with pytest.raises(ImportFormatError) as err:
        geprof_nb.load(out)
    assert str(err.value).startswith(f"{out / 'manifest.json'}: not valid JSON (Expecting property name enclosed in "
                                     "double quotes at line 1, column 2; truncated file?); and op_summary.parquet and "
                                     "op_rows.parquet")


def test_a_directory_with_another_tools_manifest_is_not_taken_for_an_export(tmp_path):
    run = write_msprof(tmp_path / "m")
    (run.path / "manifest.json").write_text(json.dumps({"format": "other"}))
    assert len(geprof_nb.load(run.path).op_summary) > 0


def _renamed(p: Profile, name: str) -> Profile:
    source = p.source

    class Renamed(type(source)):  # the same data under another run name
        @property
        def name(self) -> str:
            return name

    clone = Renamed.__new__(Renamed)
    clone.__dict__.update(source.__dict__)
    return Profile(clone)


class _Synthetic(Source):
    """A million op_summary rows made in memory, the size where Parquet pays off."""

    def __init__(self, n: int) -> None:
        rng = np.random.default_rng(7)
        start = 1_767_225_600_000_000_123 + np.cumsum(rng.integers(500, 5_000, n))
        names = pd.Index([f"layer{i}/MatMulV2" for i in range(500)] + ["N/A"], dtype=object)
        task_id = pd.array(rng.integers(0, 65535, n), dtype="Int64")
        task_id[::97] = pd.NA
        frame = pd.DataFrame({
            "Device_id": np.zeros(n, np.int64), "Model ID": np.ones(n, np.int64), "Task ID": task_id,
            "Op Name": pd.Categorical.from_codes(rng.integers(0, len(names), n), categories=names),
            "OP Type": pd.Categorical.from_codes(rng.integers(0, 3, n), categories=pd.Index(
                ["MatMulV2", "Add", "HcomAllReduce"], dtype=object)),
            "Task Type": pd.Categorical.from_codes((rng.random(n) < 0.01).astype(np.int8), categories=pd.Index(
                ["AI_CORE", "COMMUNICATION"], dtype=object)),
            "Task Start Time(us)": start / 1000.0, "Task Duration(us)": rng.integers(1_000, 9_000, n) / 1000.0,
            "aic_mac_ratio": np.where(rng.random(n) < 0.3, np.nan, rng.random(n).round(3)),
        })
        self.rows = summary.OpRows(frame, np.repeat(np.arange(1, 11), n // 10), start, np.arange(n) % 4096)

    @property
    def path(self) -> Path:
        return Path("/synthetic/PROF_000001_20260101000000000_SYNTHETIC")

    def op_rows(self) -> summary.OpRows:
        return self.rows


def test_a_million_rows(tmp_path):
    p = Profile(_Synthetic(1_000_000))
    out = export_parquet(p, tmp_path)
    q = geprof_nb.load(out)
    # check_exact: the inexact comparison of categoricals is slow at this size
    pd.testing.assert_frame_equal(q.op_summary, p.op_summary, check_exact=True)
    rows = q.source.op_rows()
    assert np.array_equal(rows.start_ns, p.source.op_rows().start_ns)
    assert np.array_equal(rows.iteration, p.source.op_rows().iteration)
    assert q.op_summary["Task ID"].isna().sum() == p.op_summary["Task ID"].isna().sum() > 0
