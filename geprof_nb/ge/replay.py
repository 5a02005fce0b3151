"""Re-issue a logged block's GE calls (:mod:`.session_log`) in a GE of their own: the simulator's side of
``Profile.replay`` (issue 29).

The caller (:func:`geprof_nb.collect.replay_run`) runs :func:`prepare` and :func:`issue` inside
:func:`.session.fresh_ge` under :func:`.what_if.applying`, so every model is built under the change, and opens
the profiling run around :func:`issue`, unless the log's own ``GEInitialize`` opened it: then its profiling
options' output is pointed at the replay's directory.  The options (``geprof.seed`` among them), graphs and
inputs are the run's, so a task the change does not touch keeps its exact duration.
"""

from __future__ import annotations

import json
from typing import Any, Mapping

from . import status as st
from .session import GEFinalize, GEInitialize, Session
from .session_log import SessionLog

#: The GE options that start profiling (left out where GE's state before the run is rebuilt).
PROFILING_OPTIONS = ("ge.exec.profilingMode", "ge.exec.profilingOptions")


class NotReplayable(RuntimeError):
    """A run whose GE calls cannot be re-issued (ACL-driven), or a re-issued call that fails where it did not."""


def check(log: SessionLog) -> None:
    """:class:`NotReplayable` saying why, if ``log``'s calls cannot be re-issued."""
    if log.refused:
        raise NotReplayable(f"this run cannot be replayed: {log.refused}; replay re-issues Session calls "
                            "(add_graph / run_graph) only")
    if not log.calls:
        raise NotReplayable("this run cannot be replayed: its code made no GE Session call (add_graph / run_graph)")


def prepare(log: SessionLog) -> dict[int, Session]:
    """GE as the log found it: initialised with its options (profiling left out: the replay opens its own run),
    and the sessions made before it with their graphs and static models built; by their numbers in the log."""
    if log.ge_options is not None:
        options = {k: v for k, v in log.ge_options.items() if k not in PROFILING_OPTIONS}
        _check(GEInitialize(options), "GEInitialize")
    sessions = {}
    for number, state in log.earlier.items():
        sess = Session(state.options)
        for graph_id, graph in state.graphs.items():
            _check(sess.add_graph(graph_id, graph), f"add_graph({graph_id})")
        for graph_id in state.loaded:
            _check(sess.build_graph(graph_id), f"build_graph({graph_id})")
        sessions[number] = sess
    return sessions


def issue(log: SessionLog, sessions: dict[int, Session], output: str) -> None:
    """Make ``log``'s calls again in order (a ``GEInitialize`` that starts profiling writes under ``output``);
    :class:`NotReplayable` if a call that succeeded in the run fails now."""
    for call in log.calls:
        if call.api == "Session":
            sessions[call.session] = Session(*call.args)
            continue
        if call.api == "GEInitialize":
            status = GEInitialize(redirected(call.args[0], output))
        elif call.api == "GEFinalize":
            status = GEFinalize()
        else:
            status = getattr(sessions[call.session], call.api)(*call.args)
        if call.status == st.SUCCESS:
            _check(status, call.api)


def redirected(options: Mapping[str, Any], output: str) -> dict[str, Any]:
    """GE ``options`` whose profiling options (if any) write under ``output``."""
    out = dict(options)
    text = out.get("ge.exec.profilingOptions")
    if text:
        prof = {k: v for k, v in json.loads(text).items() if k != "result_path"}
        out["ge.exec.profilingOptions"] = json.dumps({**prof, "output": output})
    return out


def _check(status: st.Status, api: str) -> None:
    if status != st.SUCCESS:
        raise NotReplayable(f"replaying {api}: it succeeded in the run but fails now: {st.GEGetErrorMsg()}")
