"""What a profiled block asked of GE, kept so that its run can be re-issued (``Profile.replay``, issue 29).

While a :class:`SessionLog` is active (:func:`recording`), ``GEInitialize`` / ``GEFinalize`` and every ``Session``
call (created, add / remove / build / run graph) are noted in order, with the graphs they were given and their
inputs' shapes and dtypes (:class:`InputSpec`). A session the block uses that was made before it is noted as it
stood when first used (its options, graphs and the models already loaded), and so are the GE options and the
``%%geprof`` overrides in force when the log started: :mod:`.replay` rebuilds that state before the run, then
issues the calls. An ``aclmdlExecute`` cannot be re-issued (the ACL model load happened outside the log's view): it
is noted as the reason the log cannot be replayed.
"""

from __future__ import annotations

import contextlib
import threading
import weakref
from dataclasses import dataclass, field
from typing import Any, Mapping

from .scoped import Scoped


@dataclass(frozen=True)
class Call:
    """One API call: ``api`` (``GEInitialize``, ``GEFinalize``, ``Session``, ``add_graph``, ...), the
    session it was made on (its number in the log; -1 for GE's own calls), the status it returned and its
    arguments."""

    api: str
    session: int
    status: int
    args: tuple


@dataclass(frozen=True)
class SessionState:
    """A session made before the log started, as it stood when the block first used it."""

    options: Mapping[str, str]
    graphs: Mapping[int, Any]
    #: Graph ids whose model was loaded (a static one is built again before the run; a dynamic one on its step).
    loaded: tuple[int, ...]


@dataclass(frozen=True)
class InputSpec:
    """What GE reads of an input array, its shape and dtype, kept instead of the array: a log of many steps holds
    no tensor data."""

    shape: tuple
    dtype: str


def described(inputs: Any) -> Any:
    """``inputs`` (a step's arrays) as :class:`InputSpec` s; as given if they are not a sequence of arrays (the
    call refused them, and is re-issued to be refused again)."""
    if inputs is None or isinstance(inputs, (str, bytes, Mapping)):
        return inputs
    try:
        return [InputSpec(tuple(x.shape), str(getattr(x, "dtype", ""))) for x in inputs]
    except (TypeError, AttributeError):
        return inputs


@dataclass
class SessionLog:
    """The calls of one profiled block (see the module docstring)."""

    #: GE's options when the log started (None: GE was not initialised then).
    ge_options: Mapping[str, str] | None
    #: ``simulation_settings`` in force (executor, clock, device, ranks; None where unset).
    overrides: tuple[str | None, str | None, str | None, int | None]
    calls: list[Call] = field(default_factory=list)
    #: Sessions made before the log, by their number in the log.
    earlier: dict[int, SessionState] = field(default_factory=dict)
    #: Why the calls cannot be re-issued ("" if they can).
    refused: str = ""
    #: The sessions numbered so far, weakly: the log must not keep a session (and its models' streams) alive.
    _sessions: list[weakref.ref] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def number(self, session: Any, state: Any = None) -> int:
        """``session``'s number in the log; ``state()`` (a :class:`SessionState`) is kept for one made earlier."""
        with self._lock:
            n = next((i for i, s in enumerate(self._sessions) if s() is session), None)
            if n is None:
                n = len(self._sessions)
                self._sessions.append(weakref.ref(session))
                if state is not None:
                    self.earlier[n] = state()
            return n

    def add(self, api: str, session: int, status: int, *args: Any) -> None:
        with self._lock:
            self.calls.append(Call(api, session, int(status), args))

    def refuse(self, why: str) -> None:
        with self._lock:
            self.refused = self.refused or why


_active: Scoped[SessionLog | None] = Scoped(None)


def active() -> SessionLog | None:
    """The log GE's calls are noted in now (None: none)."""
    return _active.value


def recording(log: SessionLog) -> contextlib.AbstractContextManager[SessionLog]:
    """Note the block's GE calls in ``log`` (the previous log back afterwards)."""
    return _active.set(log)
