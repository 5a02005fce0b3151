"""GE's client API: ``GEInitialize`` / ``GEFinalize`` and ``Session``.

Calls mirror the C++ API and return a :class:`Status`; on failure
``GEGetErrorMsg()`` says why (and the error is logged, as GELOGE does).
Simulation settings are GE options too, so scripts and the notebook magic take
one path: ``geprof.clock`` (``real`` | ``virtual``), ``geprof.device`` (a
preset name), ``geprof.executor`` (``v1`` | ``v2``), ``geprof.seed``.

Unlike real GE, a ``Session`` created before ``GEInitialize`` initialises GE
with default options instead of failing, so notebook cells can start anywhere.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import logging
import os
import re
import threading
import weakref
from typing import Any, Iterable, Iterator, Mapping, Sequence

from ..prof import msprof
from ..prof.api_types import GeProfInfoType
from ..prof.clock import CLOCK_MODES, clock, toolkit_entry
from ..prof.options import ProfilingOptions, ProfilingOptionsError
from ..prof.properties import BIT_GE_HOST, ProfilingProperties
from ..prof.scope import GraphProfilingReporter
from . import session_log
from . import status as st
from .cluster import (
    MAX_RANKS,
    OPTION_FAULTS,
    OPTION_RANK_SIZE,
    OPTION_RANKS_PER_NODE,
    ClusterOptionError,
    ClusterSpec,
    RankGroup,
)
from .device import DEFAULT_DEVICE, PRESETS, DevicePreset, check_aic_metrics, get_device
from .graph import Graph
from .memory import DeviceMemoryError
from .runtime import DEFAULT_SEED, GE_PROFILING_TO_STD_OUT, DeviceRuntime, LoadedModel, flush_host_profiler
from .runtime_v1 import ExecutorV1
from .runtime_v2 import ExecutorV2
from .tensor import GraphBuildError, tensor_mismatch

_log = logging.getLogger("geprof_nb.ge")

OPTION_CLOCK = "geprof.clock"
OPTION_DEVICE = "geprof.device"
OPTION_EXECUTOR = "geprof.executor"
OPTION_SEED = "geprof.seed"
EXECUTORS = {"v1": ExecutorV1(), "v2": ExecutorV2()}
DEFAULT_EXECUTOR = "v2"


class _GEState:
    """Process-wide GE state (GELib)."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.initialized = False
        self.options: dict[str, str] = {}
        self.runtime: DeviceRuntime | None = None
        self.executor = DEFAULT_EXECUTOR
        self.owns_profiling = False
        self.sessions: "weakref.WeakSet[Session]" = weakref.WeakSet()
        self.executor_override: str | None = None
        self.clock_override: str | None = None
        self.device_override: str | None = None
        self.ranks_override: int | None = None
        self.finalize_hooks: list = []
        self.last_graph: "weakref.ref[Graph] | None" = None


_state = _GEState()


class StepInfo:
    """What step hooks see of one step: the API that runs it, and afterwards whether it ran."""

    __slots__ = ("api", "ran", "error")

    def __init__(self, api: str) -> None:
        self.api = api
        #: True once the step executed on the device (the call returned success).
        self.ran = False
        #: The exception the step raised, if any (hooks see it in ``after_step``).
        self.error: BaseException | None = None

    def __repr__(self) -> str:
        return f"<StepInfo {self.api} ran={self.ran} error={self.error!r}>"


class StepHooks:
    """Callbacks around every *step*: ``Session.run_graph``, ``run_graph_async`` and ``acl.aclmdlExecute``.

    A hook is an object with ``before_step(info)`` and ``after_step(info)``
    (:class:`StepInfo`).  ``before_step`` hooks run in the order they were added,
    before the call does anything (so a hook may start or stop profiling for the
    step); ``after_step`` hooks run in reverse order once the call is over,
    also when it raised, but only for hooks whose ``before_step`` ran.  If a
    hook raises, the step does not run (``before_step``) or the exception
    propagates once every ``after_step`` has run.  With no hooks a step costs one
    attribute test.  GE knows nothing of who registers (the notebook's
    ``%%geprof`` schedule, its progress line, tests).
    """

    __slots__ = ("hooks",)

    def __init__(self) -> None:
        self.hooks: tuple = ()

    def add(self, hook) -> None:
        self.hooks = self.hooks + (hook,)

    def remove(self, hook) -> None:
        self.hooks = tuple(h for h in self.hooks if h is not hook)

    def __len__(self) -> int:
        return len(self.hooks)

    def run(self, api: str, fn, *args, ok=None):
        """Call ``fn(*args)`` as one step; ``ok(result)`` says whether it ran (default: result == 0)."""
        info = StepInfo(api)
        entered = []
        try:
            for hook in self.hooks:
                hook.before_step(info)
                entered.append(hook)
            result = fn(*args)
        except BaseException as exc:
            info.error = exc
            self._after(entered, info)
            raise
        info.ran = bool(ok(result)) if ok is not None else result == 0
        self._after(entered, info)
        return result

    @staticmethod
    def _after(entered: list, info: StepInfo) -> None:
        first: BaseException | None = None
        for hook in reversed(entered):
            try:
                hook.after_step(info)
            except BaseException as exc:  # noqa: BLE001 - every hook runs; the first error propagates
                if first is None:
                    first = exc
        if first is not None:
            raise first


#: The process-wide step hooks (see :class:`StepHooks`).
step_hooks = StepHooks()


def last_graph() -> Graph | None:
    """The graph most recently added to a Session (or loaded through ACL), if it is still alive."""
    ref = _state.last_graph
    return None if ref is None else ref()


def remember_graph(graph: Graph) -> None:
    """``graph`` is the one most recently added or loaded (what :func:`last_graph` returns while it lives)."""
    _state.last_graph = weakref.ref(graph)


def _check_settings(options: Mapping[str, Any]) -> str:
    """Validate the geprof.* options; return an error message ("" if fine)."""
    known = (OPTION_CLOCK, OPTION_DEVICE, OPTION_EXECUTOR, OPTION_SEED, OPTION_RANKS_PER_NODE, OPTION_FAULTS)
    for key in options:
        if not isinstance(key, str):
            return f"option names must be strings, got {key!r} ({type(key).__name__})"
        if key.startswith("geprof.") and key not in known:
            return f"unknown option {key!r}; geprof options are {', '.join(known)}"
    try:
        ClusterSpec.from_options(options, PRESETS[DEFAULT_DEVICE])
    except ClusterOptionError as exc:
        return f"option {exc}"
    if OPTION_CLOCK in options and options[OPTION_CLOCK] not in CLOCK_MODES:
        return f"option {OPTION_CLOCK}={options[OPTION_CLOCK]!r} is not valid; accepted: {', '.join(CLOCK_MODES)}"
    if OPTION_DEVICE in options:
        try:
            get_device(options[OPTION_DEVICE])
        except ValueError as exc:
            return f"option {OPTION_DEVICE}: {exc}"
    if OPTION_EXECUTOR in options and options[OPTION_EXECUTOR] not in EXECUTORS:
        return f"option {OPTION_EXECUTOR}={options[OPTION_EXECUTOR]!r} is not valid; accepted: {', '.join(EXECUTORS)}"
    if OPTION_SEED in options and _seed(options[OPTION_SEED]) is None:
        return f"option {OPTION_SEED}={_shown(options[OPTION_SEED])} is not valid; accepted: {SEED_ACCEPTED}"
    return ""


#: What ``geprof.seed`` takes: numpy's generators take any whole number >= 0; a 64-bit one is what a seed
#: option of a C++ runtime could hold.
SEED_ACCEPTED = "a whole number from 0 to 2**64 - 1 (18446744073709551615), as digits or an int"
_SEED_DIGITS = re.compile(r"\s*\+?[0-9]{1,20}\s*", re.ASCII)


def _seed(value: Any) -> int | None:
    """The seed a ``geprof.seed`` value gives, None if it is not one (a negative, fractional or huge number,
    ``1_0``, a bool: int() would take some of them, numpy's generators refuse negative ones)."""
    if isinstance(value, str) and _SEED_DIGITS.fullmatch(value):
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**64:
        return None
    return value


def _shown(value: Any) -> str:
    """An option's value as an error quotes it: its repr, or the ends of a long one (a container by its type:
    its repr could nest without end)."""
    if isinstance(value, int) and value.bit_length() > 200:  # repr() refuses ints past 4300 digits
        return f"<an integer of {value.bit_length()} bits>"
    text = repr(value) if value is None or isinstance(value, (str, int, float)) else f"<{type(value).__name__}>"
    return text if len(text) <= 60 else f"{text[:40]}...{text[-8:]} ({len(text)} characters)"


@toolkit_entry
def GEInitialize(options: Mapping[str, str] | None = None) -> st.Status:  # noqa: N802
    """Initialise GE; with ``ge.exec.profilingMode == "1"`` (or the environment) start profiling."""
    try:
        options = dict(options or {})
    except (TypeError, ValueError):
        return st.set_error(st.PARAM_INVALID, "GEInitialize: options must be a mapping of option name to value, "
                            f"got {type(options).__name__}")
    with _state.lock:
        if _state.initialized:
            _log.warning("GEInitialize is called repeatedly; the options of the first call stay in force")
            return st.SUCCESS
        problem = _check_settings(options)
        if problem:
            return st.set_error(st.PARAM_INVALID, problem)
        try:
            prof_options = ProfilingOptions.resolve(options)
        except ProfilingOptionsError as exc:
            return st.set_error(st.PARAM_INVALID, f"E10001: {exc}")
        st.clear_error()
        if _state.clock_override is None:  # a %%geprof --clock in force wins over GE options
            clock.set_mode(options.get(OPTION_CLOCK, "real"))
        device = _state.device_override or options.get(OPTION_DEVICE, DEFAULT_DEVICE)  # %%geprof --device wins
        runtime = DeviceRuntime(get_device(device), seed=_seed(options.get(OPTION_SEED, DEFAULT_SEED)))
        owns_profiling = False
        if prof_options is not None:
            if msprof.lib.running:
                _log.warning("profiling is already collecting into %s; the GE profiling options are ignored",
                             msprof.lib.run_dir)
            else:
                try:
                    check_aic_metrics(runtime.preset, prof_options.aic_metrics)
                except ProfilingOptionsError as exc:
                    return st.set_error(st.PARAM_INVALID, f"E10001: {exc}")
                try:
                    msprof.lib.init(prof_options.output, prof_options.to_dict())
                    owns_profiling = True
                except msprof.RunAlreadyOpen as exc:  # opened by another thread since the test above
                    _log.warning("profiling is already collecting into %s; the GE profiling options are ignored",
                                 exc.run_dir)
                except OSError as exc:
                    return st.set_error(st.PARAM_INVALID, f"E10001: profiling option 'output' "
                                        f"({prof_options.output!r}) cannot be used: {exc}; accepted: a "
                                        "directory that can be created and written")
        _state.options = options
        _state.runtime = runtime
        _state.executor = options.get(OPTION_EXECUTOR, DEFAULT_EXECUTOR)
        _state.owns_profiling = owns_profiling
        _state.initialized = True
        if os.environ.get(GE_PROFILING_TO_STD_OUT) is not None:  # GE's own host profiler, dumped at GEFinalize
            ProfilingProperties.instance().set_env_flags(BIT_GE_HOST)
        msprof.MsprofRegisterCallback(msprof.MSPROF_MODULE_FRAMEWORK, runtime.handle_command)
        if owns_profiling:
            msprof.lib.start(prof_options.data_type_config())
        _note("GEInitialize", options)
        return st.SUCCESS


@toolkit_entry
def GEFinalize() -> st.Status:  # noqa: N802
    """Close every session; finalise profiling that GE options started."""
    with _state.lock:
        if not _state.initialized:
            _log.warning("GEFinalize is called before GEInitialize")
            return st.SUCCESS
        with GraphProfilingReporter(GeProfInfoType.kGEFinalize):
            for sess in list(_state.sessions):
                sess.close()
            for hook in _state.finalize_hooks:
                hook()
        if _state.runtime is not None:
            _state.runtime.flush()  # steps run under env-only profiling (GE_PROFILING_TO_STD_OUT)
        problem = ""
        if _state.owns_profiling:
            if msprof.lib.finalize() is not None:
                problem = msprof.lib.write_problem
            _state.owns_profiling = False
        flush_host_profiler()
        ProfilingProperties.instance().set_env_flags(0)
        # a run GE did not open goes on without GE: its layers stop now (what GE holds reaches the run), so
        # nothing GE runs later is collected, into that run or, queued, into the next
        msprof.lib.unregister_callback(msprof.MSPROF_MODULE_FRAMEWORK)
        _note("GEFinalize")
        _state.initialized = False
        _state.runtime = None
        if _state.clock_override is None:  # geprof.clock lasts while GE is initialised; then the default again
            clock.set_mode("real")
        if problem:  # GE is finalised; its profiling run is, but lost data: never a silent SUCCESS (msprof said it)
            return st.set_error(st.FAILED, f"GEFinalize: {problem.removeprefix('geprof: ')}", log=False)
        return st.SUCCESS


def register_finalize_hook(hook) -> None:
    """Run ``hook()`` at every GEFinalize (modules holding GE objects clear them)."""
    _state.finalize_hooks.append(hook)


def _note(api: str, *args: Any) -> None:
    """Note a call of GE's own (not a session's) in the active session log."""
    log = session_log.active()
    if log is not None:
        log.add(api, -1, st.SUCCESS, *args)


def new_session_log() -> session_log.SessionLog:
    """A log of the calls to come, starting from GE as it is now: its options and the overrides in force."""
    return session_log.SessionLog(dict(_state.options) if _state.initialized else None,
                                  (_state.executor_override, _state.clock_override, _state.device_override,
                                   _state.ranks_override))


@contextlib.contextmanager
def fresh_ge() -> Iterator[None]:
    """A GE of the block's own: not initialised, no sessions, no overrides (finalised at the block's end).

    The process's GE (its sessions, models, control callback, clock mode) is back untouched afterwards, so a
    notebook's GE survives a replay run next to it.
    """
    global _state
    saved, mode = _state, clock.mode
    _state = _GEState()
    try:
        yield
    finally:
        try:
            if _state.initialized:
                GEFinalize()
        finally:
            _state = saved
            clock.set_mode(mode)
            if saved.initialized and saved.runtime is not None:
                msprof.MsprofRegisterCallback(msprof.MSPROF_MODULE_FRAMEWORK, saved.runtime.handle_command)


def is_initialized() -> bool:
    return _state.initialized


def device_runtime() -> DeviceRuntime | None:
    """The device of the initialised GE (``None`` before ``GEInitialize``)."""
    return _state.runtime


def device_preset() -> DevicePreset | None:
    """The device preset GE runs on, or the one ``simulation_settings(device=...)`` makes the next
    ``GEInitialize`` choose; ``None`` when that is left to the ``geprof.device`` option."""
    if _state.initialized and _state.runtime is not None:
        return _state.runtime.preset
    return get_device(_state.device_override) if _state.device_override else None


@contextlib.contextmanager
def simulation_settings(executor: str | None = None, clock_mode: str | None = None,
                        device: str | None = None, ranks: int | None = None) -> Iterator[None]:
    """Override the executor, clock and device preset for the duration of a block (the magic's
    ``--executor`` / ``--clock`` / ``--device``).

    A device preset is chosen when GE initialises: ``device`` applies to a
    ``GEInitialize`` inside the block (it wins over the ``geprof.device``
    option).  If GE is already initialised on another device this raises
    ``ValueError`` (finalise GE first); on the same device it is a no-op.
    ``ranks`` (the magic's ``--ranks``) is the ``ge.exec.rankSize`` of models
    loaded inside the block (it wins over the session's option).
    """
    problem = _check_settings({k: v for k, v in ((OPTION_EXECUTOR, executor), (OPTION_CLOCK, clock_mode),
                                                 (OPTION_DEVICE, device)) if v})
    if problem:
        raise ValueError(problem)
    if device and _state.initialized and _state.runtime is not None and _state.runtime.preset.name != device:
        raise ValueError(f"option {OPTION_DEVICE}={device!r}: GE is already initialised on "
                         f"{_state.runtime.preset.name} (a device preset is chosen at GEInitialize); call "
                         "ge.GEFinalize() first, or leave the device unset")
    if ranks is not None and not (isinstance(ranks, int) and 1 <= ranks <= MAX_RANKS):
        raise ValueError(f"{OPTION_RANK_SIZE}={ranks!r} is not valid; accepted: an integer in [1, {MAX_RANKS}]")
    saved = (_state.executor_override, _state.clock_override, _state.device_override, _state.ranks_override,
             clock.mode)
    if executor:
        _state.executor_override = executor
    if clock_mode:
        _state.clock_override = clock_mode
        clock.set_mode(clock_mode)
    if device:
        _state.device_override = device
    if ranks is not None:
        _state.ranks_override = ranks
    try:
        yield
    finally:
        _state.executor_override, _state.clock_override, _state.device_override, _state.ranks_override, mode = saved
        clock.set_mode(mode)


def ensure_initialized() -> None:
    """Initialise GE with default options if it is not (a Session or an ACL call made first does)."""
    if not _state.initialized:
        _log.info("GE was not initialised: GEInitialize({}) called implicitly")
        GEInitialize({})


def _is_graph_id(graph_id: Any) -> bool:
    return isinstance(graph_id, int) and not isinstance(graph_id, bool) and graph_id >= 0


def _reported_id(graph_id: Any) -> int:
    """The graph id the profiler records for a call (0 when the argument is not a graph id)."""
    return graph_id if _is_graph_id(graph_id) else 0


def _logged(method):
    """A Session method whose calls the active session log notes (after the call, with its status)."""
    signature = inspect.signature(method)

    @functools.wraps(method)
    def logged(self: Session, *args: Any, **kwargs: Any) -> st.Status:
        log = session_log.active()
        if log is None:
            return method(self, *args, **kwargs)
        number = log.number(self, self._log_state)
        status = method(self, *args, **kwargs)
        arguments = signature.bind(self, *args, **kwargs).arguments
        arguments.pop("self")
        arguments.pop("callback", None)  # the user's code, not GE's work
        if "inputs" in arguments:
            arguments["inputs"] = session_log.described(arguments["inputs"])
        log.add(method.__name__, number, status, *arguments.values())
        return status

    return logged


class Session:
    """A GE session (``ge::Session``): add graphs, build them, run them."""

    @toolkit_entry
    def __init__(self, options: Mapping[str, str] | None = None) -> None:
        ensure_initialized()
        self.options = dict(options or {})
        problem = _check_settings(self.options)
        if problem:
            raise ValueError(problem)
        self._graphs: dict[int, Graph] = {}
        self._models: dict[int, LoadedModel] = {}
        self._closed = False
        _state.sessions.add(self)
        log = session_log.active()
        if log is not None:
            log.add("Session", log.number(self), st.SUCCESS, self.options)

    def _log_state(self) -> session_log.SessionState:
        """This session as it stands, for a log that meets it first (made before the log started)."""
        return session_log.SessionState(dict(self.options), dict(self._graphs),
                                        tuple(g for g, m in self._models.items() if not m.dynamic))

    def _fail_if_unusable(self) -> st.Status | None:
        if not _state.initialized:
            return st.set_error(st.GE_CLI_GE_NOT_INITIALIZED, "GE is not initialised or was finalised; "
                                "call ge.GEInitialize(options) and create a new Session")
        if self._closed:
            return st.set_error(st.FAILED, "this Session was closed (GEFinalize closes every session)")
        return None

    @toolkit_entry
    @_logged
    def add_graph(self, graph_id: int, graph: Graph, options: Mapping[str, str] | None = None) -> st.Status:
        """Register ``graph`` under ``graph_id``; it is built on first run (or by ``build_graph``)."""
        with GraphProfilingReporter(GeProfInfoType.kAddGraph, _reported_id(graph_id)):
            return self._add_graph(graph_id, graph)

    def _add_graph(self, graph_id: int, graph: Graph) -> st.Status:
        bad = self._fail_if_unusable()
        if bad is not None:
            return bad
        if not _is_graph_id(graph_id):
            return st.set_error(st.PARAM_INVALID, f"AddGraph: graph_id must be an int >= 0, got {graph_id!r}")
        if not isinstance(graph, Graph):
            return st.set_error(st.PARAM_INVALID, f"AddGraph: graph must be a ge.Graph, got {type(graph).__name__}")
        if graph_id in self._graphs:
            return st.set_error(st.GE_GRAPH_GRAPH_ALREADY_EXIST, f"AddGraph: graph id {graph_id} is already added "
                                f"(graph {self._graphs[graph_id].name!r}); remove_graph it first or use another id")
        self._graphs[graph_id] = graph
        remember_graph(graph)
        st.clear_error()
        return st.SUCCESS

    @toolkit_entry
    @_logged
    def remove_graph(self, graph_id: int) -> st.Status:
        """Unregister a graph and unload its model."""
        with GraphProfilingReporter(GeProfInfoType.kRemoveGraph, _reported_id(graph_id)):
            return self._remove_graph(graph_id)

    def _remove_graph(self, graph_id: int) -> st.Status:
        bad = self._fail_if_unusable()
        if bad is not None:
            return bad
        if not _is_graph_id(graph_id) or graph_id not in self._graphs:
            return self._no_graph("RemoveGraph", graph_id)
        del self._graphs[graph_id]
        model = self._models.pop(graph_id, None)
        if model is not None:
            model.unload()
        st.clear_error()
        return st.SUCCESS

    @toolkit_entry
    @_logged
    def build_graph(self, graph_id: int, inputs: Sequence[Any] | None = None) -> st.Status:
        """Compile and load the graph now (otherwise the first ``run_graph`` does it)."""
        with GraphProfilingReporter(GeProfInfoType.kBuildGraph, _reported_id(graph_id)):
            bad = self._fail_if_unusable()
            if bad is not None:
                return bad
            if not _is_graph_id(graph_id) or graph_id not in self._graphs:
                return self._no_graph("BuildGraph", graph_id)
            status, model = self._load(graph_id)
            if model is not None and inputs is not None:
                status = self._select_inputs(model, inputs, "BuildGraph")
            if status == st.SUCCESS:
                st.clear_error()
            return status

    def _no_graph(self, api: str, graph_id: int) -> st.Status:
        """The status of a call naming a graph id that was not added (or is not a graph id at all)."""
        if not _is_graph_id(graph_id):
            return st.set_error(st.PARAM_INVALID, f"{api}: graph_id must be an int >= 0, got {graph_id!r}")
        known = ", ".join(str(k) for k in sorted(self._graphs)) or "none"
        return st.set_error(st.GE_GRAPH_GRAPH_NOT_EXIST, f"{api}: graph id {graph_id} was not added "
                            f"(added: {known}); call add_graph first")

    def _load(self, graph_id: int) -> tuple[st.Status, LoadedModel | None]:
        model = self._models.get(graph_id)
        if model is not None:
            return st.SUCCESS, model
        try:
            model = LoadedModel(_state.runtime, self._graphs[graph_id], graph_id)
            problem = self._join_cluster(model)
        except DeviceMemoryError as exc:  # GE's load fails to allocate the model's memory
            return st.set_error(st.FAILED, f"BuildGraph {graph_id}: {exc}"), None
        except GraphBuildError as exc:
            return st.set_error(st.GE_GRAPH_INFERSHAPE_FAILED, f"BuildGraph {graph_id}: {exc}"), None
        if problem:
            model.unload()
            return st.set_error(st.PARAM_INVALID, f"BuildGraph {graph_id}: {problem}"), None
        self._models[graph_id] = model
        return st.SUCCESS, model

    def _join_cluster(self, model: LoadedModel) -> str:
        """Run ``model`` on every rank of the cluster the options describe; an error message if it cannot."""
        options = {**_state.options, **self.options}
        if _state.ranks_override is not None:
            options[OPTION_RANK_SIZE] = str(_state.ranks_override)
        spec = ClusterSpec.from_options(options, model.runtime.preset)
        job = model.graph.job
        if job is not None and job.world_size != (spec.world_size if spec is not None else 1):
            return (f"{OPTION_RANK_SIZE}={spec.world_size if spec is not None else 1}, but graph {model.graph.name!r} "
                    f"is {job.describe()}: world size {job.world_size} (tp x pp x dp); run it on "
                    f"{job.world_size} ranks ({OPTION_RANK_SIZE}={job.world_size}, %%geprof --ranks {job.world_size})")
        if spec is None:
            return ""
        if model.dynamic:
            return (f"{OPTION_RANK_SIZE}={spec.world_size}: the multi-rank simulation runs static graphs; "
                    f"graph {model.graph.name!r} has dynamic shapes")
        sizes = {int(n.attrs.get("rank_size", 1)) for n in model.graph.nodes if n.type.startswith("Hcom")}
        if job is None and sizes - {spec.world_size}:
            return (f"{OPTION_RANK_SIZE}={spec.world_size}, but graph {model.graph.name!r} was built for "
                    f"world_size {sorted(sizes)[0]}; build it with world_size={spec.world_size}")
        group = RankGroup(model, spec)
        model.run_on_ranks(group, spec.links, group.comm)
        model.reporter.parallel_info = group.rank_info(0)
        return ""

    def _select_inputs(self, model: LoadedModel, inputs: Sequence[Any], api: str) -> st.Status:
        """Check ``inputs`` against the graph's Data nodes; pick the build for their shapes."""
        datas = model.input_nodes
        if isinstance(inputs, (str, bytes, Mapping)) or not isinstance(inputs, Iterable):
            return st.set_error(st.PARAM_INVALID, f"{api}: inputs must be a list of arrays, one per Data input "
                                f"({', '.join(d.name for d in datas)}), got {type(inputs).__name__}")
        inputs = list(inputs)
        if len(inputs) != len(datas):
            return st.set_error(st.PARAM_INVALID, f"{api}: graph {model.graph.name!r} has {len(datas)} inputs "
                                f"({', '.join(d.name for d in datas)}), got {len(inputs)}")
        shapes = {}
        for i, (x, d) in enumerate(zip(inputs, datas)):
            problem = tensor_mismatch(x, d.outputs[0])
            if problem:
                return st.set_error(st.PARAM_INVALID, f"{api}: input {i} ({d.name!r}) {problem}")
            shapes[d.name] = tuple(int(v) for v in getattr(x, "shape", ()))
        try:
            model.select(shapes)
        except DeviceMemoryError as exc:
            return st.set_error(st.FAILED, f"{api}: {exc}")
        except GraphBuildError as exc:
            return st.set_error(st.GE_GRAPH_INFERSHAPE_FAILED, f"{api}: {exc}")
        return st.SUCCESS

    @toolkit_entry
    @_logged
    def run_graph(self, graph_id: int, inputs: Sequence[Any] | None = None) -> st.Status:
        """Run one step of the graph (synchronously, like ``Session::RunGraph``)."""
        if step_hooks.hooks:
            return step_hooks.run("RunGraph", self._run_graph, graph_id, inputs)
        return self._run_graph(graph_id, inputs)

    def _run_graph(self, graph_id: int, inputs: Sequence[Any] | None) -> st.Status:
        with GraphProfilingReporter(GeProfInfoType.kRunGraph, _reported_id(graph_id)):
            return self._run(graph_id, inputs, "RunGraph")

    @toolkit_entry
    @_logged
    def run_graph_async(self, graph_id: int, inputs: Sequence[Any] | None = None,
                        callback: Any = None) -> st.Status:
        """``Session::RunGraphAsync``: run one step, then call ``callback(status, outputs)`` if given
        (the user's code: the real clock counts while it runs)."""
        if step_hooks.hooks:
            status = step_hooks.run("RunGraphAsync", self._run_graph_async, graph_id, inputs)
        else:
            status = self._run_graph_async(graph_id, inputs)
        if callback is not None:
            with clock.users_code():
                callback(status, [])
        return status

    def _run_graph_async(self, graph_id: int, inputs: Sequence[Any] | None) -> st.Status:
        with GraphProfilingReporter(GeProfInfoType.kRunGraphAsync, _reported_id(graph_id)):
            return self._run(graph_id, inputs, "RunGraphAsync")

    def _run(self, graph_id: int, inputs: Sequence[Any] | None, api: str) -> st.Status:
        bad = self._fail_if_unusable()
        if bad is not None:
            return bad
        if not _is_graph_id(graph_id) or graph_id not in self._graphs:
            return self._no_graph(api, graph_id)
        status, model = self._load(graph_id)
        if model is None:
            return status
        if inputs is not None:
            status = self._select_inputs(model, inputs, api)
            if status != st.SUCCESS:
                return status
        elif model.dynamic:
            try:
                model.select(None)
            except DeviceMemoryError as exc:
                return st.set_error(st.FAILED, f"{api}: {exc}")
            except GraphBuildError as exc:
                return st.set_error(st.PARAM_INVALID, f"{api}: {exc}")
        name = _state.executor_override or self.options.get(OPTION_EXECUTOR) or _state.executor
        EXECUTORS[name].execute(model)
        st.clear_error()
        return st.SUCCESS

    @toolkit_entry
    def model(self, graph_id: int) -> LoadedModel | None:
        """The loaded model of a graph (``None`` until it is built)."""
        return self._models.get(graph_id)

    @toolkit_entry
    def close(self) -> None:
        """Unload every model of this session."""
        for model in self._models.values():
            model.unload()
        self._models.clear()
        self._graphs.clear()
        self._closed = True
        _state.sessions.discard(self)

    def __repr__(self) -> str:
        graphs = ", ".join(f"{k}: {g.name!r}" for k, g in self._graphs.items())
        return f"<ge.Session {{{graphs}}}{' closed' if self._closed else ''}>"
