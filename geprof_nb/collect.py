"""Run code under one profiling collection: the core that ``%%geprof``, ``geprof run`` and
``geprof_nb.profile()`` share.

:class:`Collection` is its start/finish pair; :func:`collect` runs a callable between them, the
``with geprof_nb.profile():`` block (:mod:`.profile_block`) runs a block.  A collection opens a run
through the msprof library (which starts GE's collection through
its control callback, whether GE is already initialised or the code initialises it), records
every step or a step schedule's steps (:mod:`.prof.step_schedule`), runs the code, and
finalises the run even when the code raises or is interrupted.  The code's exception comes
back with the run, its traceback starting at the code's own frame, for the caller to raise
once the data is shown.

It knows nothing of notebooks: the magic passes its progress line and its Ctrl-C guard
(:mod:`.nb.progress`) in; the terminal runs without them.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import inspect
import os
import shutil
import tempfile
import threading
import types
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Protocol

from .analysis import ClusterProfile, ImportFormatError, Profile, RunDirError, load
from .analysis.rundir import RunDir
from .ge import acl, session_log, what_if
from .ge import replay as ge_replay
from .ge.device import check_aic_metrics, get_device
from .ge.session import device_preset, fresh_ge, new_session_log, simulation_settings, step_hooks
from .prof import msprof
from .prof.clock import toolkit_entry
from .prof.events import AIC_METRICS
from .prof.options import CUSTOM_EVENT_MAX, CUSTOM_EVENT_MIN, ProfilingOptions
from .prof.run_opener import OpenRun, described, open_run
from .prof.step_schedule import NONE, WARMUP, ScheduledCollection, StepSchedule

#: Defaults of a profiled cell or script where they differ from GE's: a person wants the step timeline.
COLLECTION_DEFAULTS = {
    "output": "geprof_output",
    "training_trace": "on",
    "task_trace": "on",
    "aic_metrics": "PipeUtilization",
}

#: (flag, profilingOptions field, metavar, help) of ``%%geprof`` and ``geprof run``.
PROFILING_FLAGS = [
    ("--output", "output", "DIR", "directory for run directories (default: geprof_output)"),
    ("--training-trace", "training_trace", "on|off", "FP/BP step trace (default: on)"),
    ("--task-trace", "task_trace", "on|off|l0|l1",
     "task time: l1 with op info and PMU, l0 times only, on = l1; GE options also call the field task_time "
     "(default: on)"),
    ("--fp-point", "fp_point", "OP", "op that starts the forward pass (default: auto-detect)"),
    ("--bp-point", "bp_point", "OP", "op that ends the backward pass (default: auto-detect)"),
    ("--hccl", "hccl", "on|off", "collective communication data (default: off)"),
    ("--aicpu", "aicpu", "on|off", "AI CPU data (default: off)"),
    ("--aic-metrics", "aic_metrics", "GROUP",
     "AI Core PMU group: " + ", ".join(AIC_METRICS) + ", or Custom:0x49,0x8,... (up to 8 PMU event ids in "
     f"[0x{CUSTOM_EVENT_MIN:X}, 0x{CUSTOM_EVENT_MAX:X}]); L2Cache and MemoryAccess need an A2-class chip (Ascend910B) "
     "(default: PipeUtilization)"),
    ("--msproftx", "msproftx", "on|off", "msproftx / mstx ranges (default: off)"),
    ("--ge-api", "ge_api", "off|l0|l1", "GE API and host scheduling of dynamic-shape ops (default: off)"),
    ("--runtime-api", "runtime_api", "on|off", "runtime API calls (default: off)"),
    ("--task-memory", "task_memory", "on|off", "static memory plan events, a geprof extension (default: off)"),
    ("--storage-limit", "storage_limit", "SIZE",
     "delete the oldest data past this size, e.g. 500MB, at least 200MB (default: none)"),
    ("--checkpoint-interval", "checkpoint_interval", "SECONDS",
     "how often the run's metadata and gathered records reach the run directory, so a killed run loses at most "
     "about that much; 0.1 to 3600, a geprof extension (default: 1)"),
]

#: The metavar of ``--device`` (``%%geprof`` and ``geprof run``).
DEVICE_METAVAR = "PRESET[:field=value,...]"


def device_flag_type(value: str) -> str:
    """An argparse ``type`` for ``--device``: a preset, or a what-if preset with changed fields
    (``Ascend910B:ai_core_num=20``, :func:`geprof_nb.ge.device.get_device`)."""
    try:
        get_device(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return value


_PHASE = {NONE: "not profiled", WARMUP: "warmup (collected, discarded)", "record": "recording",
          "record_and_save": "recording"}


class StepProgress(Protocol):
    """A progress display of the steps (:class:`geprof_nb.nb.progress.Progress`)."""

    def step(self, steps: int, recorded: int | None = None, phase: str = "") -> Any: ...

    def finish(self, status: str = "done", step_figure: Callable[[], str | None] | None = None) -> Any: ...


class StepGuard(Protocol):
    """Defers Ctrl-C to the end of a step (:class:`geprof_nb.nb.progress.InterruptGuard`)."""

    def install(self) -> bool: ...

    def uninstall(self) -> None: ...

    def enter(self) -> None: ...

    def exit(self, raise_pending: bool = True) -> bool: ...


class OutputUnusable(Exception):
    """No run directory could be opened under ``output`` (nothing ran); ``reason`` is the OSError."""

    def __init__(self, output: str, reason: OSError) -> None:
        self.output = output
        self.reason = reason
        super().__init__(f"{output}: cannot be used ({reason})")


@dataclass
class Collected:
    """A finalised run: where it is, what the code raised, the steps it ran, and, if the run's final
    info.json could not be written, the description the library held (:func:`load_collected` uses it)."""

    run_dir: Path | None
    error: BaseException | None
    steps: int
    info_not_written: dict[str, Any] | None = None
    #: The progress display, finished by :func:`load_collected` with the run's step figure, and how the code ended.
    progress: StepProgress | None = None
    status: str = "done"
    #: What could not be written into the run directory, in words ("" if everything was):
    #: :attr:`geprof_nb.prof.msprof.Msprof.write_problem`.
    write_problem: str = ""
    #: Re-runs the collected code under a what-if change (:func:`replayer`; None: not replayable at all).
    replay: Callable[..., Profile | ClusterProfile] | None = None


class _Steps:
    """The step hook of one collection: schedule, progress, Ctrl-C at step boundaries."""

    def __init__(self, collection: ScheduledCollection | None, progress: StepProgress | None,
                 guard: StepGuard | None) -> None:
        self.collection = collection
        self.progress = progress
        self.guard = guard
        self.steps = 0
        #: Scheduled steps that began while another thread's step was running: a window that opens or
        #: closes between them cuts that step (:data:`OVERLAPPING_STEPS_NOTE`).
        self.overlapping = 0
        self._running = 0
        self._lock = threading.Lock()

    def before_step(self, info: Any) -> None:
        if self.guard is not None:
            self.guard.enter()
        if self.collection is not None:
            try:
                self.collection.before_step()
            except BaseException:
                if self.guard is not None:
                    self.guard.exit(raise_pending=False)
                raise
        if self.collection is not None:  # the step runs (after_step will be called); only a schedule cares
            with self._lock:
                self.overlapping += self._running > 0
                self._running += 1

    def after_step(self, info: Any) -> None:
        if self.collection is not None:
            with self._lock:
                self._running -= 1
        try:
            if self.collection is not None:
                self.collection.after_step(info.ran)
            if info.ran:
                self.steps += 1
                self._show()
        finally:
            if self.guard is not None:
                self.guard.exit()  # a Ctrl-C during the step is raised here, once the step is complete

    def _show(self) -> None:
        if self.progress is None:
            return
        c = self.collection
        try:
            if c is None:
                self.progress.step(self.steps)
            else:
                self.progress.step(self.steps, len(c.recorded), _PHASE[c.current_action])
        except Exception:  # noqa: BLE001 - a broken display must not break the run
            self.progress = None


def users_traceback(error: BaseException, code_filename: str | None, trailing: tuple[str, ...] = ()) -> BaseException:
    """``error`` with a traceback that starts at the profiled code's own frame (``code_filename``).

    The frames above it (:func:`collect`, the caller's runner) are geprof's, not the
    person's: they should see the traceback their code would raise without profiling.  A
    Ctrl-C that the step guard raises at the end of a step also loses the frames at its end
    from the files in ``trailing`` (the step APIs', this module's and the guard's).  An error raised before
    the code ran keeps its whole traceback.
    """
    frames = []
    tb = error.__traceback__
    while tb is not None:
        frames.append(tb)
        tb = tb.tb_next
    start = next((i for i, t in enumerate(frames) if t.tb_frame.f_code.co_filename == code_filename), None)
    if start is None:
        return error
    keep = frames[start:]
    if isinstance(error, KeyboardInterrupt):
        ours = {os.path.abspath(f) for f in trailing}
        while len(keep) > 1 and os.path.abspath(keep[-1].tb_frame.f_code.co_filename) in ours:
            keep.pop()
    new = None
    for t in reversed(keep):
        new = types.TracebackType(new, t.tb_frame, t.tb_lasti, t.tb_lineno)
    return error.with_traceback(new)


class AlreadyCollecting(RuntimeError):
    """A run is open already: the msprof library collects into one run at a time."""

    @classmethod
    def of(cls, run: OpenRun) -> AlreadyCollecting:
        """The error naming ``run``'s directory and what opened it."""
        return cls(f"profiling is already collecting into {run.run_dir} (opened by {run.opened_by}); {run.finish}")


def check_not_collecting() -> None:
    """Raise :class:`AlreadyCollecting` naming the open run directory and what opened it, if a run is open."""
    run = open_run(msprof.lib)
    if run is not None:
        raise AlreadyCollecting.of(run)


def check_device_counters(options: ProfilingOptions) -> None:
    """``ProfilingOptionsError`` naming ``aic_metrics`` if the device GE runs on (or is set to initialise
    on) has no such counter group (L2Cache and MemoryAccess need an A2-class chip): refused before a
    run opens, as GE's own options refuse it, rather than a run without PMU data."""
    preset = device_preset()
    if preset is not None:
        check_aic_metrics(preset, options.aic_metrics)


class Collection:
    """One profiling run from :meth:`open` to :meth:`finish`: the start/finish pair that :func:`collect`
    (``%%geprof``, ``geprof run``) and :func:`geprof_nb.profile` share.

    :meth:`open` opens the run directory, :meth:`start` starts collecting (every step, or the
    schedule's) and hooks the steps, :meth:`finish` finalises the run whatever the code did.
    """

    def __init__(self, options: ProfilingOptions, switch: int, schedule: StepSchedule | None, subject: str,
                 info_key: str, info: dict[str, Any] | None, make_progress: Callable[[], StepProgress] | None,
                 guard: StepGuard | None) -> None:
        self.options = options
        self.schedule = schedule
        self.switch = switch
        #: The GE calls of the collected code, from :meth:`start` to :meth:`finish` (what :func:`replayer` re-issues).
        self.log = new_session_log()
        self._recording = contextlib.ExitStack()  # the log is active while the code runs
        self.subject = subject
        self.info_key = info_key
        self.info = dict(info or {})
        self.collection = ScheduledCollection(schedule, self.switch, msprof.lib) if schedule is not None else None
        self.progress = make_progress() if make_progress is not None else None
        self.guard = guard
        self.hook = _Steps(self.collection, self.progress, guard)
        #: Files whose frames end a Ctrl-C that the guard raises at the end of a step (see :func:`users_traceback`).
        # the files of the frames a Ctrl-C raised at a step's end passes through after the user's line:
        # the step APIs (run_graph, aclmdlExecute), the clock's pause around them and their hooks, this
        # module, the guard
        self.trailing = (__file__, inspect.getfile(type(step_hooks)), inspect.getfile(acl),
                         inspect.getfile(toolkit_entry)) + \
            ((inspect.getfile(type(guard)),) if guard is not None else ())

    @classmethod
    @toolkit_entry
    def open(cls, options: ProfilingOptions, schedule: StepSchedule | None = None, *, subject: str = "cell",
             info_key: str = "magic", info: dict[str, Any] | None = None,
             make_progress: Callable[[], StepProgress] | None = None, guard: StepGuard | None = None) -> Collection:
        """Open a new run directory under ``options.output``; :class:`OutputUnusable` if none can be opened.

        The arguments are :func:`collect`'s; ``make_progress`` is called once the run is open (the clock
        restarts then).
        """
        switch = options.data_type_config()
        check_device_counters(options)
        try:
            msprof.lib.init(options.output, options.to_dict(), mode=info_key)
        except msprof.RunAlreadyOpen as exc:  # opened since check_not_collecting (another thread won the race)
            raise AlreadyCollecting.of(described(exc.run_dir, exc.mode)) from None
        except OSError as exc:
            raise OutputUnusable(options.output, exc) from None
        return cls(options, switch, schedule, subject, info_key, info, make_progress, guard)

    @toolkit_entry
    def start(self) -> None:
        """Start collecting (without a schedule: now; with one: from its first recorded step) and hook the steps."""
        if self.guard is not None:
            self.guard.install()
        if self.collection is None:
            msprof.lib.start(self.switch)
        self.log = new_session_log()  # GE as it is when the code starts
        self._recording.enter_context(session_log.recording(self.log))
        step_hooks.add(self.hook)

    @toolkit_entry
    def finish(self, error: BaseException | None) -> Collected:
        """Finalise the run; ``error`` (what the code raised) is said in the run's note and returned with it."""
        guard = self.guard
        if guard is not None:
            guard.enter()  # a Ctrl-C while the run is finalised waits until it is on disk
        run_dir = None
        late = False
        try:
            step_hooks.remove(self.hook)
            self._recording.close()
            steps = self.hook.steps
            interrupted = isinstance(error, KeyboardInterrupt)
            if interrupted:
                note = (f"the profiled {self.subject} was interrupted (KeyboardInterrupt) after {steps} "
                        f"step{'s' * (steps != 1)}; the data of the completed steps is kept")
            elif error is not None:
                note = f"the profiled {self.subject} raised {type(error).__name__}: {error}"
            else:
                note = ""
            try:
                if self.collection is not None:
                    self.collection.finish()  # closes an open window (a warmup one: its data is discarded)
                    if self.hook.overlapping:
                        msprof.lib.add_note(OVERLAPPING_STEPS_NOTE.format(n=self.hook.overlapping))
                self.info["steps"] = steps
                msprof.lib.set_run_info(self.info_key, self.info)
            finally:
                run_dir = msprof.lib.finalize(note=note)  # flushes the runtime's pending device records
            status = "done" if error is None else "interrupted" if interrupted else f"stopped by {type(error).__name__}"
        finally:
            if guard is not None:
                late = guard.exit(raise_pending=False)
                guard.uninstall()
        if late and error is None:
            error = KeyboardInterrupt()
        problem = msprof.lib.write_problem if run_dir is not None else ""
        if problem:
            status += ", but not everything could be written (see stderr)"
        return Collected(run_dir, error, self.hook.steps, msprof.lib.info_not_written(), self.progress, status,
                         problem, replayer(self.log, self.options, self.schedule, self.info_key))


def collect(code: Callable[[], None], options: ProfilingOptions, schedule: StepSchedule | None = None, *,
            code_filename: str | None = None, subject: str = "cell", info_key: str = "magic",
            info: dict[str, Any] | None = None, make_progress: Callable[[], StepProgress] | None = None,
            guard: StepGuard | None = None) -> Collected:
    """Run ``code()`` under one profiling run with ``options``; the run is finalised whatever happens.

    ``schedule`` picks the steps to record (``None``: every step).  ``info_key`` says what started
    the run (info.json ``mode``: "magic", "cli") and records ``info`` as info.json ``[info_key]``
    with the number of steps added; ``subject`` ("cell", "script")
    names the code in the run's note when it raises.  ``make_progress`` is called once the
    run is open (the clock restarts then).  Raises :class:`OutputUnusable` if no run can be
    opened; the code's own exception is returned in :attr:`Collected.error`.
    """
    run = Collection.open(options, schedule, subject=subject, info_key=info_key, info=info,
                          make_progress=make_progress, guard=guard)
    error: BaseException | None = None
    try:
        run.start()
        code()
    except BaseException as exc:  # noqa: BLE001 - finalise, then the caller shows the data and re-raises
        error = users_traceback(exc, code_filename, run.trailing)
    return run.finish(error)


#: The note of a scheduled run whose steps ran on several threads at once.
OVERLAPPING_STEPS_NOTE = ("step schedule: {n} steps began while another thread's step was running; the schedule "
                          "counts the steps of all threads as one sequence, so a window that opened or closed "
                          "while several steps ran may hold part of a step, and the recorded steps are approximate "
                          "(run the scheduled steps from one thread for exact windows)")

#: A note of a Profile built on the collecting process's description (:func:`load_collected`).
INFO_NOT_WRITTEN_NOTE = ("the run's final info.json could not be written: this status, these notes and counts are "
                         "the collecting process's; loading the run directory later reads its older info.json")


def replayer(log: session_log.SessionLog, options: ProfilingOptions | None, schedule: StepSchedule | None = None,
             info_key: str = "profile") -> Callable[..., Profile | ClusterProfile]:
    """``Profile.replay`` of a run whose code made ``log``'s GE calls: ``replay(**what_if_keywords)`` re-runs them
    (:func:`replay_run`).  ``options`` / ``schedule``: the collection's (None: the code's own GEInitialize opened
    the run, as a script with GE profiling options does)."""

    def replay(**change: Any) -> Profile | ClusterProfile:
        return replay_run(log, change, options, schedule, info_key)

    return replay


def replay_run(log: session_log.SessionLog, change: dict[str, Any], options: ProfilingOptions | None,
               schedule: StepSchedule | None = None, info_key: str = "profile") -> Profile | ClusterProfile:
    """Re-issue ``log``'s GE calls in a fresh GE (the process's own GE is left as it is) under the what-if
    ``change`` (:func:`geprof_nb.ge.what_if.OpChange.from_keywords`'s keywords), collected as the run was into
    a new temporary directory, and load the new run; a ``device`` in ``change`` is the device GE initialises on
    (over the run's own).  :class:`geprof_nb.ge.replay.NotReplayable` for an ACL-driven run;
    :class:`AlreadyCollecting` while a run is open."""
    ge_replay.check(log)
    check_not_collecting()
    change = dict(change)
    new_device = change.pop("device", None)
    op_change = what_if.OpChange.from_keywords(**change)
    output = tempfile.mkdtemp(prefix="geprof_replay_")
    try:
        return _owning(_replay_into(output, log, op_change, new_device, options, schedule, info_key), output)
    except BaseException:
        shutil.rmtree(output, ignore_errors=True)
        raise


def _owning(profile: Profile | ClusterProfile, output: str) -> Profile | ClusterProfile:
    """``profile``, with its temporary directory removed when it is garbage-collected: a verify() or a what-if
    sweep makes many replays, and none should stay on disk once nothing reads it (export one to keep it)."""
    weakref.finalize(profile, shutil.rmtree, output, True)
    return profile


def _replay_into(output: str, log: session_log.SessionLog, op_change: what_if.OpChange, new_device: str | None,
                 options: ProfilingOptions | None, schedule: StepSchedule | None,
                 info_key: str) -> Profile | ClusterProfile:
    """The replay of :func:`replay_run`, collected into ``output``."""
    executor, clock_mode, device, ranks = log.overrides
    with fresh_ge(), what_if.applying(op_change), simulation_settings(executor, clock_mode, new_device or device,
                                                                      ranks):
        sessions = ge_replay.prepare(log)
        if options is None:
            ge_replay.issue(log, sessions, output)
            return load(output)
        run = Collection.open(dataclasses.replace(options, output=output), schedule, subject="replay",
                              info_key=info_key)
        error: BaseException | None = None
        try:
            run.start()
            ge_replay.issue(log, sessions, output)
        except BaseException as exc:  # noqa: BLE001 - the run is finalised, then the error raised
            error = exc
        collected = run.finish(error)
    if error is not None:
        raise error
    return load(collected.run_dir)


def load_collected(collected: Collected) -> tuple[Profile | ClusterProfile | None, str]:
    """The finalised run as ``%%geprof``, ``geprof run`` and ``geprof_nb.profile()`` hand it back, and
    what to say about it on stderr ("" when nothing).

    ``None`` when the run directory cannot be loaded at all (removed or replaced while the run collected):
    the job has run, so this is said, not raised.

    When the run's final info.json could not be written (a full disk, a directory made read-only),
    the file in the run directory is an older one: status "running", without the later notes and
    the counts of records that could not be written.  The run's Profile (a cluster's: rank 0's) is
    then built on the description the library held instead (``RunDir(path, info)``: the analysis
    never imports the runtime, so it is handed a plain dict), so its ``complete``, ``notes`` and
    ``dropped`` are the run's own.  The message says so and gives the notes the run directory lacks
    (the counts per kind were said once, when the run was finalised: :attr:`Collected.write_problem`):
    a later ``geprof_nb.load()`` of it shows neither.
    """
    try:
        loaded = load(collected.run_dir)
    except (OSError, ImportFormatError, RunDirError) as exc:
        _finish_progress(collected, None)
        steps = f"{collected.steps} step{'s' * (collected.steps != 1)}"
        return None, (f"geprof: the run directory {collected.run_dir} cannot be loaded ({exc}): it was removed or "
                      f"replaced while the run collected; the {steps} ran, but what they recorded is lost")
    _finish_progress(collected, None if isinstance(loaded, ClusterProfile) else loaded)
    loaded.replay = collected.replay
    info = collected.info_not_written
    if info is None:
        return loaded, ""
    cluster = isinstance(loaded, ClusterProfile)
    ranks = loaded.ranks if cluster else {0: loaded}
    rank = next((r for r, p in ranks.items() if p.path.name == info.get("run")), None)
    on_disk = ranks[rank].info if rank is not None else {}
    said = []
    if rank is not None:
        notes = [*(info.get("notes") or []), INFO_NOT_WRITTEN_NOTE]
        mine = Profile(RunDir(ranks[rank].path, dict(info, notes=notes)), ranks[rank].device_id)
        loaded = ClusterProfile(loaded.path, {**ranks, rank: mine}, loaded.notes) if cluster else mine
        loaded.replay = collected.replay
        said.append(f"geprof: {f'rank {rank} Profile' if cluster else 'the Profile'} handed back holds the run's own "
                    f"status, notes and counts (Profile.dropped); geprof_nb.load('{mine.path}') later reads the older "
                    f"info.json (status {on_disk.get('status', 'unknown')!r}), without them")
    lost = [n for n in info.get("notes") or [] if n not in (on_disk.get("notes") or [])]
    if lost:
        said += ["geprof: notes the run directory lacks:", *(f"    {n}" for n in lost)]
    return loaded, "\n".join(said)


def _finish_progress(collected: Collected, profile: Profile | None) -> None:
    """End the progress display with the run's step figure (a single run's; computed only if it is shown)."""
    if collected.progress is None:
        return

    def step_figure() -> str | None:
        split = profile.step_split if profile is not None else None
        return split.headline() if split is not None else None

    try:
        collected.progress.finish(collected.status, step_figure)
    except Exception:  # noqa: BLE001 - the display of progress never hides the run
        pass
