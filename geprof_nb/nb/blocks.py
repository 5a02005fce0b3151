"""A tab's content as blocks: an HTML string, or a :class:`~.report.Chart`.  The static reports join their
HTML; the widgets show HTML blocks in HTML widgets and Charts in Image widgets (:class:`PictureView`).
Shared by the explorer, the cluster explorer and the compare view."""

from __future__ import annotations

from typing import Collection

import ipywidgets as widgets

from .report import Chart, Picture

#: The MIME type of a widget view in a display bundle.
WIDGET_VIEW_MIME = "application/vnd.jupyter.widget-view+json"


def blocks_html(blocks: list, figures: Collection[str]) -> str:
    """The blocks as one HTML string: a Chart embedded if ``figures`` names it (or is ``"all"``)."""
    return "".join(b.static_html(figures) if isinstance(b, Chart) else b for b in blocks)


class PictureView:
    """An Image widget that shows a Picture, or an HTML message in its place; updated in place."""

    def __init__(self, picture: Picture | None = None) -> None:
        self.image = widgets.Image(format="png", layout=widgets.Layout(max_width="100%", height="auto"))
        self.message = widgets.HTML()
        self.box = widgets.VBox([self.image, self.message])
        self.picture: Picture | None = None
        if picture is not None:
            self.show(picture)

    def show(self, picture: Picture) -> None:
        self.picture = picture
        if picture.png is not None:
            self.image.value = picture.png
            self.image.layout.display = None
            self.message.value = ""
            self.message.layout.display = "none"
        else:
            self.image.layout.display = "none"
            self.message.value = picture.html()
            self.message.layout.display = None


def block_widget(block: str | Chart) -> widgets.Widget:
    """The widget of one block."""
    return PictureView(block.picture).box if isinstance(block, Chart) else widgets.HTML(block)
