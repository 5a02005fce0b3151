"""What a notebook's outputs say, apart from what changes from one execution to the next.

Stored (committed) and fresh outputs are compared through :func:`normalised`: per code cell, each
output's kind and its text (stream text, text/plain, text/html) with paths, run-directory stamps,
widget model ids, addresses, encoded images and wall-clock times masked, and without the progress
line (shown or not by wall time).  Images are compared by
presence only: their pixels follow the masked times.
"""

from __future__ import annotations

import re

import nbformat

TEXT_MIMES = ("text/plain", "text/html", "text/markdown")
MASKS = [
    (re.compile(r"data:image/png;base64,[A-Za-z0-9+/=]+"), "data:image/png;base64,<png>"),
    (re.compile(r"(?:/[\w.+-]+)+/?"), "<path>"),  # absolute paths (working directories differ)
    (re.compile(r"\b[0-9a-f]{32}\b|\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b"), "<id>"),
    (re.compile(r"\b0x[0-9a-f]{6,}\b"), "<address>"),
    # run directory names carry the time they were made (and torch_npu's, the process id)
    (re.compile(r"PROF_\d{6}_\d{17}_[A-Z]+"), "PROF_<run>"),
    (re.compile(r"CLUSTER_(?:\d{6}_)?\d{17}_[A-Z]+"), "CLUSTER_<run>"),
    (re.compile(r"_\d+_\d{17}_ascend_pt"), "_<pid>_<stamp>_ascend_pt"),
    # wall-clock seconds ("msprof-analyze cluster: 6.0 s"); simulated times are in ms / us and stay
    (re.compile(r"\b\d+\.\d+ s\b"), "<seconds> s"),
]


def mask(text: str) -> str:
    for pattern, replacement in MASKS:
        text = pattern.sub(replacement, text)
    return text


def normalised(nb: nbformat.NotebookNode) -> list[list[tuple]]:
    """Per code cell, its outputs as (output type, stream name or mime types, masked texts)."""
    cells = []
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        outputs = []
        for out in cell.get("outputs", []):
            if out["output_type"] == "stream":
                text = _text(out["text"])
                if outputs and outputs[-1][:2] == ("stream", out["name"]):  # the kernel cuts a stream anywhere
                    text = outputs.pop()[2] + text
                outputs.append(("stream", out["name"], text))
            elif out["output_type"] == "error":
                outputs.append(("error", out["ename"], mask(out["evalue"])))
            elif _is_progress_line(out):
                continue
            else:
                data = out.get("data", {})
                texts = tuple(mask(_text(data[m])) for m in TEXT_MIMES if m in data)
                outputs.append((out["output_type"], tuple(sorted(data)), texts))
        cells.append([(kind, name, mask(text)) if kind == "stream" else (kind, name, text)
                      for kind, name, text in outputs])
    return cells


def _is_progress_line(out: dict) -> bool:
    """A long cell's progress line (nb/progress.py) is shown only when the cell outlasts its update
    interval in wall time, so whether it is there depends on the machine's load."""
    data = out.get("data", {})
    return (out["output_type"] == "display_data" and list(data) == ["text/plain"]
            and _text(data["text/plain"]).startswith("geprof ("))


def _text(value: str | list[str]) -> str:
    return value if isinstance(value, str) else "".join(value)
