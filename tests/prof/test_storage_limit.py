"""``storage_limit``: parsing, and msprof's aging — past the limit the oldest chunks of data that
grows with the run are deleted (static descriptions never), the run says so, and what remains loads.

The aging runs are made small by lowering ``msprof.lib.chunk_records`` and, right after init,
``msprof.lib.storage_limit_bytes`` (the parsed limit, an attribute).  The same run without a limit
is the reference: on the virtual clock both write identical chunks, so what aging removed is known
exactly.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import geprof_nb
from geprof_nb import ge
from geprof_nb.ge.runtime import MODEL_IDS
from geprof_nb.prof import msprof, rawdata
from geprof_nb.prof.handoff import StorageAging
from geprof_nb.prof.options import ProfilingOptions, ProfilingOptionsError

STEPS = 40
CHUNK_RECORDS = 64
LIMIT_BYTES = 30_000
STATIC_KINDS = {k for k, spec in rawdata.RECORD_KINDS.items() if not spec.aging}


# ----------------------------------------------------------------------------------------- parsing


def _init(tmp_path: Path, limit: str, **fields: str) -> ge.Status:
    opts = {"output": str(tmp_path), "storage_limit": limit, **fields}
    return ge.GEInitialize({"geprof.clock": "virtual", "ge.exec.profilingMode": "1",
                            "ge.exec.profilingOptions": json.dumps(opts)})


@pytest.mark.parametrize("limit, mb", [("200MB", 200), ("4294967295MB", 4294967295), ("1024MB", 1024)])
def test_storage_limit_accepted_and_applied(tmp_path, limit, mb):
    assert _init(tmp_path, limit) == ge.SUCCESS
    assert msprof.lib.storage_limit_bytes == mb * 1024 * 1024
    assert ProfilingOptions.parse({"storage_limit": limit}).storage_limit_mb == mb


@pytest.mark.parametrize("limit, fragment", [
    ("199MB", "199MB is out of range"),
    ("0MB", "0MB is out of range"),
    ("200", "the unit MB is required"),
    ("1GB", "the unit MB is required"),
    ("200mb", "the unit MB is required"),
    ("MB", "the unit MB is required"),
    ("-300MB", "the unit MB is required"),
    ("4294967296MB", "out of range"),
])
def test_bad_storage_limit_is_an_error_naming_the_field(tmp_path, limit, fragment):
    with pytest.raises(ProfilingOptionsError) as info:
        ProfilingOptions.parse({"storage_limit": limit})
    assert info.value.field == "storage_limit" and fragment in str(info.value)
    assert "200MB" in info.value.accepted
    assert _init(tmp_path, limit) == ge.PARAM_INVALID
    assert "'storage_limit'" in ge.GEGetErrorMsg() and fragment in ge.GEGetErrorMsg()
    assert not msprof.lib.running and not list(tmp_path.glob("PROF_*"))


def test_storage_limit_must_be_a_string(tmp_path):
    with pytest.raises(ProfilingOptionsError, match="storage_limit"):
        ProfilingOptions.parse({"storage_limit": 300})


def test_no_storage_limit_means_no_aging(tmp_path):
    assert _init(tmp_path, "") == ge.SUCCESS
    assert msprof.lib.storage_limit_bytes is None


# ------------------------------------------------------------------------------------------- aging


def _aging_run(tmp_path: Path, monkeypatch, limit: int | None) -> tuple[geprof_nb.Profile, list[tuple[str, int]]]:
    """STEPS training steps with small chunks; returns the Profile and every chunk flushed, in order.
    Each run is a process of its own to GE's model ids, so the limited and the full run compare."""
    MODEL_IDS.restart()
    assert _init(tmp_path, "200MB", training_trace="on") == ge.SUCCESS
    monkeypatch.setattr(msprof.lib, "chunk_records", CHUNK_RECORDS)
    monkeypatch.setattr(msprof.lib, "storage_limit_bytes", limit)
    flushed: list[tuple[str, int]] = []
    account = StorageAging.account

    def spy(aging, chunk, size, kind, records):
        assert size == os.path.getsize(chunk.path)  # the bytes the chunk's write counted are the file's
        flushed.append((os.path.relpath(chunk.path, msprof.lib.run_dir), size))
        account(aging, chunk, size, kind, records)

    monkeypatch.setattr(StorageAging, "account", spy)
    s = ge.Session()
    assert s.add_graph(1, ge.models.mlp(batch_size=4, in_features=16, hidden=(16,))) == ge.SUCCESS
    for _ in range(STEPS):
        assert s.run_graph(1) == ge.SUCCESS
    ge.GEFinalize()
    return geprof_nb.load(tmp_path), flushed


def _chunks(p: geprof_nb.Profile) -> dict[str, int]:
    return {str(f.relative_to(p.path)): f.stat().st_size for f in p.path.rglob("*.npy")}


def _kind(rel: str) -> str:
    return Path(rel).name.split(".")[0]


@pytest.fixture
def aged(tmp_path, monkeypatch):
    """(limited run, its flush order, the same run without a limit)."""
    full, _ = _aging_run(tmp_path / "full", monkeypatch, None)
    limited, flushed = _aging_run(tmp_path / "limited", monkeypatch, LIMIT_BYTES)
    return limited, flushed, full


def test_aging_deletes_the_oldest_aging_chunks_and_stays_under_the_limit(aged):
    p, flushed, full = aged
    kept, all_chunks = _chunks(p), _chunks(full)
    assert [rel for rel, _ in flushed] == list(dict.fromkeys(rel for rel, _ in flushed))  # each flushed once
    assert set(all_chunks) == {rel for rel, _ in flushed}  # same chunks as the unlimited run
    deleted = [rel for rel, _ in flushed if rel not in kept]
    assert deleted, "the limit was not reached: the test is too small"
    assert sum(kept.values()) <= LIMIT_BYTES < sum(all_chunks.values())
    # never a static description
    assert not {_kind(r) for r in deleted} & STATIC_KINDS
    assert {_kind(r) for r in all_chunks} & STATIC_KINDS <= {_kind(r) for r in kept}
    # the deleted chunks are exactly the oldest aging ones, in flush order
    aging_order = [rel for rel, _ in flushed if _kind(rel) not in STATIC_KINDS]
    assert deleted == aging_order[:len(deleted)]
    assert {_kind(r) for r in deleted} >= {"hwts"}


def test_info_json_counts_what_aged_out(aged):
    p, flushed, full = aged
    kept = _chunks(p)
    deleted = [(rel, size) for rel, size in flushed if rel not in kept]
    aged_out = p.info["aged_out"]
    assert aged_out["chunks"] == len(deleted)
    assert aged_out["bytes"] == sum(size for _, size in deleted)
    expected_records: dict[str, int] = {}
    for rel, _ in deleted:
        kind = _kind(rel)
        n = len(np.load(full.path / rel, allow_pickle=False))
        expected_records[kind] = expected_records.get(kind, 0) + n
    assert aged_out["records"] == expected_records
    # records written minus aged out = records still on disk
    for kind, written in p.info["records"].items():
        assert written - aged_out["records"].get(kind, 0) == len(p.run.load(kind)), kind
    assert full.info["aged_out"] == {"chunks": 0, "bytes": 0, "records": {}}


def test_notes_and_dropped_say_so(aged):
    p, _, full = aged
    aged_out = p.info["aged_out"]
    notes = [n for n in p.notes if n.startswith("storage_limit")]
    assert len(notes) == 1
    note = notes[0]
    assert f"the {aged_out['chunks']} oldest chunks" in note and "early iterations are missing" in note
    for kind, n in aged_out["records"].items():
        assert f"{n} {kind}" in note
        assert p.dropped[f"{kind} (aged out)"] == n
    assert not any(n.startswith("storage_limit") for n in full.notes) and full.dropped == {}


def test_remaining_iterations_load_correctly(aged):
    p, _, full = aged
    its = p.iterations
    assert 0 < len(its) < STEPS
    assert list(its) == list(range(int(its[0]), STEPS + 1))  # the newest ones, none missing
    per_it = p.op_summary.groupby(p.iteration_of_ops.to_numpy()).size()
    assert set(per_it) == {len(full.op_summary) // STEPS}  # every kept iteration is whole
    mine = p.op_summary.reset_index(drop=True)
    ref = full.op_summary[np.isin(full.iteration_of_ops, its)].reset_index(drop=True)
    # the first kept task waited for a task that aged out: its wait time is unknown now
    assert mine.loc[0, "Task Wait Time(us)"] == 0 < ref.loc[0, "Task Wait Time(us)"]
    pd.testing.assert_frame_equal(mine.iloc[1:], ref.iloc[1:], check_categorical=False)
    st = p.step_trace
    ref_st = full.step_trace[full.step_trace["Iteration ID"].isin(st["Iteration ID"])].reset_index(drop=True)
    assert len(st) > 0
    dab = "Data Aug Bound(us)"
    pd.testing.assert_frame_equal(st.drop(columns=dab), ref_st.drop(columns=dab))
    # the first kept step-trace row has no previous iteration end any more
    assert np.isnan(st.loc[0, dab]) and not np.isnan(ref_st.loc[0, dab])
    pd.testing.assert_series_equal(st[dab].iloc[1:], ref_st[dab].iloc[1:])
    assert list(st["Iteration ID"])[-1] == STEPS
    assert not p.run.damaged
