"""What the notebook tests run and look at: a small profiled cell, and what a widget tree shows."""

from __future__ import annotations

#: Two steps of a small MLP with an AllReduce: a ``%%geprof`` cell's body.
MLP_CELL = """
sess = ge.Session()
sess.add_graph(1, ge.models.mlp(batch_size=8, world_size=2))
for step in range(2):
    sess.run_graph(1)
"""


def widget_html(widget) -> str:
    """Every HTML value under a widget (what the front end renders as HTML)."""
    out = [widget.value] if hasattr(widget, "value") and isinstance(widget.value, str) else []
    for child in getattr(widget, "children", ()):
        out.append(widget_html(child))
    return "".join(out)
