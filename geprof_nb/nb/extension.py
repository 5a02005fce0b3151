"""``%load_ext geprof_nb``: what loading the extension registers, and unloading removes."""

from __future__ import annotations

from typing import Any

from matplotlib.figure import Figure

from .. import ge
from ..analysis import ClusterProfile, Profile
from . import display as nb_display
from . import plots
from .magics import GeprofMagics

#: What ``%load_ext geprof_nb`` prints: that it loaded, and what to type next.
LOADED_LINE = ("geprof_nb loaded: put %%geprof over a cell to profile it (%%geprof? lists the flags); "
               "%geprof config opens the options panel, %geprof help lists the commands.")


def load_ipython_extension(ipython: Any) -> None:
    """Register ``%%geprof`` / ``%geprof``, put ``ge`` in the namespace, render Profiles.

    ``display(profile)`` (and a Profile as a cell's value) shows the same mimebundle as
    ``%%geprof``: the results explorer with its static HTML / PNG / text fallback; a
    ClusterProfile shows the cluster explorer (Cluster and Ranks tabs).

    Figures from :mod:`.plots` are plain matplotlib Figures (no pyplot); if no
    backend has registered a PNG printer for them, register one so they show.  Prints
    :data:`LOADED_LINE`, so a new user sees that it worked and what to type next.
    """
    ipython.register_magics(GeprofMagics)
    ipython.push({"ge": ge})
    formatters = ipython.display_formatter.formatters
    ipython.display_formatter.mimebundle_formatter.for_type(Profile, nb_display.profile_mimebundle)
    ipython.display_formatter.mimebundle_formatter.for_type(ClusterProfile, nb_display.profile_mimebundle)
    try:
        formatters["image/png"].lookup_by_type(Figure)
    except KeyError:
        formatters["image/png"].for_type(Figure, plots.figure_png)
    print(LOADED_LINE)


def unload_ipython_extension(ipython: Any) -> None:
    """Remove the magics, the ``ge`` name and the formatters (only those this extension registered)."""
    ipython.magics_manager.magics["cell"].pop("geprof", None)
    ipython.magics_manager.magics["line"].pop("geprof", None)
    ipython.magics_manager.registry.pop(GeprofMagics.__name__, None)
    if ipython.user_ns.get("ge") is ge:
        del ipython.user_ns["ge"]
    formatters = ipython.display_formatter.formatters
    mimebundle = ipython.display_formatter.mimebundle_formatter
    for kind in (Profile, ClusterProfile):
        if mimebundle.type_printers.get(kind) is nb_display.profile_mimebundle:
            del mimebundle.type_printers[kind]
    if formatters["image/png"].type_printers.get(Figure) is plots.figure_png:
        del formatters["image/png"].type_printers[Figure]
