"""The one display call of a Profile, and of a ClusterProfile.

``show_profile`` (what ``%%geprof`` and ``%geprof show`` call) and ``display(profile)`` both
show one mimebundle built by :mod:`.explorer` (:mod:`.cluster_explorer` for a cluster): the
tabbed widget explorer for front ends that run widgets (JupyterLab), and a static HTML report,
the step timeline PNG and a text summary for those that do not (nbconvert, GitHub, a terminal
IPython).  The explorers are built of :mod:`.report` (what they show) and :mod:`.html_parts`
(escaped HTML) and do not import this module back.
"""

from __future__ import annotations

from IPython.display import display

from ..analysis import ClusterProfile, Profile


def profile_mimebundle(profile: Profile | ClusterProfile) -> dict[str, object]:
    """The raw bundle of a Profile: widget view, static HTML report, step timeline PNG, text summary
    (for a ClusterProfile: the cluster explorer's, :mod:`.cluster_explorer`)."""
    if isinstance(profile, ClusterProfile):
        from .cluster_explorer import ClusterExplorer

        return ClusterExplorer(profile).mimebundle()
    from .explorer import Explorer  # ipywidgets is imported when something is first shown

    return Explorer(profile).mimebundle()


def show_profile(profile: Profile | ClusterProfile) -> None:
    """Show a Profile's explorer (with its static fallback) in one display call:
    what ``%%geprof``, ``%geprof show`` and ``display(profile)`` show."""
    display(profile_mimebundle(profile), raw=True)
