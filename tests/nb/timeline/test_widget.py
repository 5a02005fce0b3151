"""The Timeline widget in Python: its display bundle (widget view plus the static fallback), its replies
to the browser's requests, moving the view, and its browser side shipped as package data."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from geprof_nb.nb.timeline import Timeline

REPO = Path(__file__).resolve().parents[3]
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


@pytest.fixture(scope="module")
def timeline(resnet_run):
    return Timeline(resnet_run.profile)


def test_the_bundle_has_the_widget_and_a_static_fallback(resnet_run, timeline):
    data, _ = timeline._repr_mimebundle_()
    assert data[WIDGET_VIEW]["model_id"] == timeline.model_id
    assert data["image/png"].startswith(b"\x89PNG")
    assert f"Timeline of {resnet_run.profile.name}" in data["text/html"]
    assert "<li>stream 1</li>" in data["text/html"] and "<img" in data["text/html"]
    assert data["text/plain"].startswith(f"geprof timeline of {resnet_run.profile.name}: ")
    assert 'alt="task Gantt per stream of the last step"' in data["text/html"]


def test_the_static_png_is_the_last_steps_task_gantt(resnet_run, timeline, monkeypatch):
    from geprof_nb.nb import plots

    seen = {}
    real = plots.task_gantt

    def spy(ops, **kw):
        seen["rows"], seen["title"] = len(ops), kw.get("title")
        return real(ops, **kw)

    monkeypatch.setattr(plots, "task_gantt", spy)
    timeline.static_png()
    p = resnet_run.profile
    last = int(p.iteration_of_ops.max())
    assert seen == {"rows": int((p.iteration_of_ops == last).sum()), "title": f"Tasks per stream of step {last}"}


def test_the_static_html_escapes_names(timeline, monkeypatch):
    monkeypatch.setattr(timeline.data.lanes[0], "label", "<script>alert(1)</script>")
    html = timeline.static_html(None)
    assert "<script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_requests_are_answered_and_bad_ones_get_an_error_reply(timeline, monkeypatch):
    sent = []
    monkeypatch.setattr(timeline, "send", lambda content, buffers=None: sent.append((content, buffers)))
    timeline._on_message(timeline, {"type": "view", "id": 7, "t0": 0.0, "t1": 1000.0, "columns": 100,
                                    "lanes": ["steps", "stream/1"]}, [])
    reply, buffers = sent[-1]
    assert reply["id"] == 7 and reply["type"] == "view" and set(reply["lanes"]) == {"steps", "stream/1"}
    assert reply["bytes"] == sum(len(b) for b in buffers) > 0
    timeline._on_message(timeline, {"type": "nonsense", "id": 8}, [])
    assert sent[-1][0] == {"type": "error", "id": 8,
                           "message": "ValueError: unknown request type 'nonsense'; accepted: view, op, detail, search"}
    timeline._on_message(timeline, {"type": "view", "id": 9, "t0": 0, "t1": 1, "columns": 5, "lanes": ["x"]}, [])
    assert sent[-1][0]["type"] == "error" and "unknown lane ids ['x']" in sent[-1][0]["message"]


def test_zoom_to_step_shows_that_steps_window(timeline):
    step, lo, hi = timeline.data.steps[1]
    timeline.zoom_to_step(step)
    assert timeline.window == [lo, hi]
    with pytest.raises(ValueError, match=r"step 99 is not in this timeline; steps: \[1, 2, 3\]"):
        timeline.zoom_to_step(99)
    with pytest.raises(ValueError, match="t0 < t1"):
        timeline.zoom(5, 5)


def test_the_browser_side_is_package_data(tmp_path):
    """A non-editable install has the ES module and the CSS beside the Python (setuptools build_py)."""
    subprocess.run([sys.executable, "-c", "from setuptools import setup; setup()", "-q", "egg_info", "--egg-base",
                    str(tmp_path), "build_py", "--build-lib", str(tmp_path / "lib")], cwd=REPO, check=True,
                   capture_output=True)
    built = tmp_path / "lib" / "geprof_nb" / "nb" / "timeline"
    for name in ("timeline.js", "timeline.css"):
        assert (built / name).read_bytes() == (REPO / "geprof_nb" / "nb" / "timeline" / name).read_bytes()
