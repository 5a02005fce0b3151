"""What a widget tree shows, for tests of the explorer's tabs."""

from __future__ import annotations


def widget_html(widget) -> str:
    """Every HTML value under a widget (what the front end renders as HTML)."""
    out = [widget.value] if hasattr(widget, "value") and isinstance(widget.value, str) else []
    for child in getattr(widget, "children", ()):
        out.append(widget_html(child))
    return "".join(out)
