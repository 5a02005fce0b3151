"""A ``%%geprof`` cell's Profile replays the cell's GE calls: ``what_if(...).verify()`` works on it (issue 29)."""

from __future__ import annotations

import tempfile

import numpy as np
import pytest
from IPython.utils.capture import capture_output

CELL = """
sess = ge.Session()
sess.add_graph(1, ge.models.resnet50(batch_size=2, image_size=64, training=True, world_size=1))
for step in range(3):
    sess.run_graph(1)
"""


@pytest.fixture(autouse=True)
def _replays_in_tmp_path(tmp_path, monkeypatch):
    """Replays write into a new temporary directory (tempfile.mkdtemp): the test's own, removed with it."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))


def test_a_geprof_cells_what_if_is_verified_by_replaying_the_cell(ip):
    with capture_output():
        ip.run_cell_magic("geprof", "--clock virtual", CELL)
    profile = ip.user_ns["_geprof"]
    for change in ({"op_speedup": {"MatMul*": 2.0}}, {"remove_ops": ["Relu*"]}):
        checked = profile.what_if(**change).verify()
        assert len(checked) == 3 and np.abs(checked["error"]).max() < 0.01, change
        assert (checked["simulated_ns"] < profile.what_if().predicted["now_ns"]).all(), change
