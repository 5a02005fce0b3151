"""The settings of a ``%%geprof`` cell: its flags, their checks, and the stored defaults.

A cell runs with the built-in defaults (:data:`MAGIC_DEFAULTS` over GE's),
overridden by what ``%geprof config`` (the options panel) stored in a
:class:`ConfigStore`, overridden by the cell's own flags.  Every field has one
flag and one validator, shared by the magic, the panel and ``%geprof config``,
so a value is accepted or refused the same way everywhere and any set of values
has a flag line (:func:`flag_line`) that reproduces it.
"""

from __future__ import annotations

import argparse
import copy
import difflib
import inspect
import re
import weakref
from dataclasses import dataclass
from typing import Any, Callable

from IPython.core.error import UsageError
from IPython.core.magic_arguments import argument, argument_group, kwds, magic_arguments, parse_argstring
from IPython.utils.process import arg_split

from ..collect import COLLECTION_DEFAULTS, DEVICE_METAVAR, PROFILING_FLAGS, device_flag_type
from ..ge.cluster import MAX_RANKS
from ..ge.device import DEFAULT_DEVICE, PRESETS, check_aic_metrics, get_device
from ..ge.session import DEFAULT_EXECUTOR, EXECUTORS
from ..prof import events
from ..prof.clock import CLOCK_MODES
from ..prof.options import ProfilingOptions, ProfilingOptionsError, validate_field
from ..prof.step_schedule import FIELDS as SCHEDULE_FIELDS
from ..prof.step_schedule import StepSchedule, StepScheduleError

#: Defaults of the magic where they differ from GE's (those of ``geprof run`` too).
MAGIC_DEFAULTS = COLLECTION_DEFAULTS


def _field_type(field: str):
    """An argparse ``type`` that validates a flag value as the profilingOptions field."""

    def convert(value: str) -> str:
        if any(c in "'\"" for c in value):  # IPython splits flag lines without shell quoting: quotes stay
            raise argparse.ArgumentTypeError(f"{value!r} has a quote; accepted: the value as one word without "
                                             "quotes (the %%geprof flag line keeps quotes as characters)")
        try:
            return validate_field(field, value)
        except ProfilingOptionsError as exc:
            # a flag value is a word: an empty choice (training_trace '') cannot be typed, so is not offered
            typeable = [c for c in exc.choices if c]
            accepted = ", ".join(map(repr, typeable)) if typeable else exc.accepted
            raise argparse.ArgumentTypeError(f"{value!r} is not valid; accepted: {accepted}") from None

    convert.__name__ = field
    return convert


class _SetOnce(argparse.Action):
    """Store a flag's value; the same flag again with another value is an error, not "last one wins".

    ``--aic-metrics Memory ... --aic-metrics L2Cache`` is a conflict the person did
    not mean to make (often a flag line pasted over another); repeating the same
    value is harmless and accepted.
    """

    def __call__(self, parser, namespace, values, option_string=None):
        old = getattr(namespace, self.dest, None)
        if old is not None and old != values:
            raise argparse.ArgumentError(self, f"given twice with different values ({old!r}, {values!r}); "
                                               "accepted: one value per flag")
        setattr(namespace, self.dest, values)


def _count_type(field: str):
    """An argparse ``type`` for a schedule field or ``--ranks``: a whole number >= 0 (``--ranks``: at most
    MAX_RANKS), checked by :func:`validate_config_field` as the panel checks it."""

    def convert(value: str) -> int:
        try:
            return validate_config_field(field, value)
        except ConfigError as exc:
            raise argparse.ArgumentTypeError(exc.message) from None

    convert.__name__ = field
    return convert


#: (flag, field, accepted values) of the simulation settings; "" means: as GE is initialised.
SIMULATION_FLAGS = [
    ("--executor", "executor", tuple(sorted(EXECUTORS))),
    ("--clock", "clock", tuple(CLOCK_MODES)),
    ("--device", "device", tuple(PRESETS)),
]

PROFILING_FIELDS = tuple(field for _, field, _, _ in PROFILING_FLAGS)
SIMULATION_FIELDS = tuple(field for _, field, _ in SIMULATION_FLAGS)
SCHEDULE_FIELD_NAMES = tuple(field for field, _ in SCHEDULE_FIELDS)
#: Ranks simulated together (``ge.exec.rankSize``); 0: as the session's options say.
RANKS_FIELD = "ranks"
#: Every field a flag line / the options panel sets, in flag-line order.
CONFIG_FIELDS = PROFILING_FIELDS + SIMULATION_FIELDS + (RANKS_FIELD,) + SCHEDULE_FIELD_NAMES
FLAG_OF: dict[str, str] = {field: flag for flag, field, _, _ in PROFILING_FLAGS}
FLAG_OF.update({field: flag for flag, field, _ in SIMULATION_FLAGS})
FLAG_OF.update({field: flag for field, flag in SCHEDULE_FIELDS})
FLAG_OF[RANKS_FIELD] = "--ranks"
#: Flags of a line that belong to one cell, not to the defaults.
CELL_ONLY = {"name": "-o", "no_display": "--no-display"}


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Plain-text help for ``%%geprof?`` and ``%geprof help``: IPython's ``MagicHelpFormatter`` writes
    reST (a ``::`` block before the usage, ``<>`` around metavars), which a notebook shows as it is."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        return super()._fill_text(inspect.cleandoc(text), width, indent)  # a docstring's indent goes

    def add_usage(self, usage, actions, groups, prefix: str | None = "usage: %") -> None:  # noqa: ANN001
        super().add_usage(usage, actions, groups, prefix)  # IPython's formatter prefixes one "%" to the prog


#: How every flag's help ends: ``(default: <the built-in default>)``.
_DEFAULT_TEXT = re.compile(r"\(default: (?P<builtin>[^()]*)\)$")


def help_with_defaults(parser: argparse.ArgumentParser, values: dict[str, Any]) -> str:
    """``parser``'s help with the defaults in force: a field whose value in ``values`` (a
    :class:`ConfigStore`'s) is not its built-in default says ``(default: <value>, set by %geprof
    config instead of <built-in>)`` in place of ``(default: <built-in>)``.  The parser itself is left as it is."""
    builtin = builtin_defaults()
    changed = {f: v for f, v in values.items() if f in builtin and v != builtin[f]}
    if not changed:
        return parser.format_help()
    shown = copy.deepcopy(parser)
    for action in shown._actions:
        if action.dest in changed and action.help:
            value = changed[action.dest]
            text = str(value if value != "" else "none").replace("%", "%%")  # argparse %-formats a help
            action.help = _DEFAULT_TEXT.sub(lambda m: f"(default: {text}, set by %%geprof config instead of "
                                                      f"{m['builtin']})", action.help)
    return shown.format_help()


def cell_flags(func: Callable) -> Callable:
    """Give ``func`` every ``%%geprof`` flag (IPython ``magic_arguments``; apply ``magic_arguments()`` over it).

    Flags default to ``None`` so that a cell's flags can be told apart from the
    stored defaults they override (:func:`cell_settings`).
    """
    decorators = [argument_group("profilingOptions fields")]
    decorators += [argument(flag, dest=field, type=_field_type(field), default=None, metavar=metavar, help=help_text,
                            action=_SetOnce) for flag, field, metavar, help_text in PROFILING_FLAGS]
    decorators += [
        argument_group("simulation (default: as GE is initialised)"),
        argument("--executor", choices=sorted(EXECUTORS), default=None, action=_SetOnce,
                 help="GE executor (GE option geprof.executor): v2 (RT2) or v1 (hybrid); matters most for dynamic "
                      f"shapes (default: {DEFAULT_EXECUTOR})"),
        argument("--clock", choices=list(CLOCK_MODES), default=None, action=_SetOnce,
                 help="host clock (GE option geprof.clock): real: host time is your code's wall time between geprof "
                      "calls plus GE's modelled costs; "
                 "virtual: modelled costs only, runs repeat exactly (default: real)"),
        argument("--device", type=device_flag_type, default=None, action=_SetOnce, metavar=DEVICE_METAVAR,
                 help="device preset (GE option geprof.device) for a GE initialised in the cell: "
                      f"{', '.join(PRESETS)}, or a what-if such as Ascend910B:ai_core_num=20,hbm_bandwidth=1.2e12 "
                      f"(default: {DEFAULT_DEVICE})"),
        argument("--ranks", type=_count_type(RANKS_FIELD), default=None, action=_SetOnce, metavar="N",
                 help="simulate N ranks together (GE option ge.exec.rankSize), one run directory each under "
                      "CLUSTER_*/rank_<r>/; the graph must be built with world_size=N; 0 = as the session's "
                      "options say (default: 0)"),
        argument_group("step schedule (torch.profiler.schedule)"),
        argument("--skip-first", dest="skip_first", type=_count_type("skip_first"), default=None, action=_SetOnce,
                 metavar="N",
                 help="steps not profiled at the start (default: 0)"),
        argument("--wait", type=_count_type("wait"), default=None, action=_SetOnce, metavar="N",
                 help="steps off at the start of each cycle (default: 0)"),
        argument("--warmup", type=_count_type("warmup"), default=None, action=_SetOnce, metavar="N",
                 help="steps collected then discarded before the active ones (default: 0)"),
        argument("--active", type=_count_type("active"), default=None, action=_SetOnce, metavar="N",
                 help="steps recorded per cycle; 0 = no schedule, every step is recorded (default: 0)"),
        argument("--repeat", type=_count_type("repeat"), default=None, action=_SetOnce, metavar="N",
                 help="number of cycles; 0 = until the cell ends (default: 0)"),
        argument_group("the cell"),
        argument("-o", dest="name", default=None, metavar="NAME", action=_SetOnce,
                 help="also bind the Profile to this variable (it is always bound to _geprof)"),
        argument("--no-display", action="store_true",
                 help="collect and bind the Profile, show nothing (no progress)"),
    ]
    for decorator in reversed(decorators):  # as if stacked top to bottom over ``func``
        func = decorator(func)
    return func


@magic_arguments()
@kwds(formatter_class=HelpFormatter)
@cell_flags
def _flag_line_parser(line: str) -> None:
    """The ``%%geprof`` flags alone, to read a flag line outside a cell (the panel, ``%geprof config``)."""


_flag_line_parser.parser.prog = "%%geprof"
_flag_line_parser.parser.allow_abbrev = False  # as the cell magic's: a flag is named in full


def parse_flags(func: Callable, line: str) -> argparse.Namespace:
    """``parse_argstring(func, line)``, where an unknown flag is answered with the closest known
    one and the list of flags (argparse alone says only "unrecognized arguments")."""
    try:
        return parse_argstring(func, line)
    except ValueError as exc:  # IPython's arg_split (shlex) on an unmatched quote
        raise UsageError(f"the flag line cannot be split into words ({exc}); accepted: flags and values without "
                         "quotes") from None
    except UsageError as exc:
        text = str(exc)
        if text.endswith(": expected one argument"):
            _value_like_a_flag(func.parser, line, text)
        if not text.startswith("unrecognized arguments:"):
            raise
        known = sorted({o for a in func.parser._actions for o in a.option_strings if o not in ("-h", "--help")})
        words = [w.split("=", 1)[0] for w in text.split(":", 1)[1].split() if w.startswith("-")]
        close = difflib.get_close_matches(words[0], known, n=1) if words else []
        hint = f"; did you mean {close[0]}?" if close else ""
        raise UsageError(f"{text}{hint}; accepted flags: {', '.join(known)} (%%geprof? explains them)") from None


def _value_like_a_flag(parser: argparse.ArgumentParser, line: str, text: str) -> None:
    """argparse reads a value that starts with "-" (``--storage-limit -5MB``) as a flag and says the flag
    "expected one argument": say whether the value is valid and what is accepted instead."""
    flag = text.split(":", 1)[0].removeprefix("argument ").split("/")[0]
    words = arg_split(line, strict=False)
    action = next((a for a in parser._actions if flag in a.option_strings), None)
    if action is None or flag not in words or words.index(flag) + 1 >= len(words):
        return
    value = words[words.index(flag) + 1]
    if value in parser._option_string_actions:  # the next word is a flag: the value is missing
        return
    if action.type is not None:
        try:
            action.type(value)
        except argparse.ArgumentTypeError as exc:
            raise UsageError(f"argument {flag}: {exc}") from None
    joined = f"{flag}={value}" if flag.startswith("--") else f"{flag}{value}"
    raise UsageError(f"argument {flag}: {value!r} starts with '-', so it reads as a flag; accepted: {joined}") from None


def builtin_defaults() -> dict[str, Any]:
    """The defaults of every flag-line field before ``%geprof config`` changes any."""
    base = ProfilingOptions()
    values: dict[str, Any] = {field: getattr(base, field) for field in PROFILING_FIELDS}
    values.update(MAGIC_DEFAULTS)
    values.update({field: "" for field in SIMULATION_FIELDS})
    values.update({field: 0 for field in SCHEDULE_FIELD_NAMES})
    values[RANKS_FIELD] = 0
    return values


def options_from_args(args: argparse.Namespace, defaults: dict[str, str] | None = None) -> ProfilingOptions:
    """profilingOptions from parsed flags over ``defaults`` over :data:`MAGIC_DEFAULTS`."""
    values = dict(MAGIC_DEFAULTS)
    values.update({k: v for k, v in (defaults or {}).items() if k in PROFILING_FIELDS})
    for _, field, _, _ in PROFILING_FLAGS:
        v = getattr(args, field, None)
        if v is not None:
            values[field] = v
    return ProfilingOptions.parse(values)


class ConfigError(ValueError):
    """A flag-line field has a bad value: ``field``, its ``flag`` and a message saying what is accepted."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        self.flag = FLAG_OF.get(field, field)
        self.message = message
        super().__init__(f"{self.flag}: {message}")


def validate_config_field(field: str, value: Any) -> Any:
    """The canonical value of one field, or :class:`ConfigError` saying what is accepted."""
    if field in PROFILING_FIELDS:
        try:
            value = validate_field(field, value)
        except ProfilingOptionsError as exc:
            detail = str(exc).split(": ", 1)[-1]  # drop "profiling option 'x'" (the flag is named instead)
            raise ConfigError(field, detail) from None
        if any(c.isspace() or c in "'\"" for c in value):
            # IPython's magic grammar (arg_split, not posix) keeps quotes: such a value has no flag-line form
            raise ConfigError(field, f"{value!r} has a space or a quote; accepted: one word without spaces or "
                                     "quotes (the %%geprof flag line cannot carry them)")
        return value
    if field in SIMULATION_FIELDS:
        accepted = dict((f, a) for _, f, a in SIMULATION_FLAGS)[field]
        if value in ("", None):
            return ""
        if field == "device":
            try:
                get_device(value)
            except ValueError as exc:
                raise ConfigError(field, str(exc)) from None
            if any(c.isspace() or c in "'\"" for c in value):
                raise ConfigError(field, f"{value!r} has a space or a quote; accepted: one word, e.g. "
                                         "Ascend910B:ai_core_num=20")
            return value
        if value not in accepted:
            raise ConfigError(field, f"{value!r} is not valid; accepted: {', '.join(accepted)} (or empty: "
                                     "as GE is initialised)")
        return value
    if field in SCHEDULE_FIELD_NAMES or field == RANKS_FIELD:
        accepted = f"0 (as the session says) to {MAX_RANKS}" if field == RANKS_FIELD else "0, 1, 2, ..."
        try:
            n = int(value)
        except (TypeError, ValueError):
            raise ConfigError(field, f"{value!r} is not a whole number; accepted: {accepted}") from None
        if isinstance(value, bool) or (isinstance(value, float) and value != n):
            raise ConfigError(field, f"{value!r} is not a whole number; accepted: {accepted}")
        if n < 0:
            raise ConfigError(field, f"{n} is negative; accepted: {accepted}")
        if field == RANKS_FIELD and n > MAX_RANKS:
            raise ConfigError(field, f"{n} is too many; accepted: {accepted}")
        return n
    raise ConfigError(field, f"unknown field; known: {', '.join(CONFIG_FIELDS)}")


def schedule_from(values: dict[str, Any]) -> StepSchedule | None:
    """The step schedule of a set of field values (``None``: profile every step); ConfigError if invalid."""
    try:
        return StepSchedule.from_fields(**{f: int(values[f]) for f in SCHEDULE_FIELD_NAMES})
    except StepScheduleError as exc:
        raise ConfigError(exc.field, str(exc).split(": ", 1)[-1]) from None


def flag_line(values: dict[str, Any], defaults: dict[str, Any] | None = None) -> str:
    """The ``%%geprof`` flags of ``values`` that differ from ``defaults`` (the built-in ones by default)."""
    defaults = builtin_defaults() if defaults is None else defaults
    parts = []
    for field in CONFIG_FIELDS:
        value = values.get(field, defaults[field])
        if value != defaults[field]:
            parts.append(f"{FLAG_OF[field]} {value}")  # values are single words (validate_config_field)
    return " ".join(parts)


class ConfigStore:
    """The defaults of later ``%%geprof`` cells: what the options panel and ``%geprof config`` set.

    ``values`` holds every field of :data:`CONFIG_FIELDS` (profilingOptions
    fields as strings, ``executor``/``clock``/``device`` as a choice or "" for
    "as GE is initialised", schedule fields as ints).  Changes are validated as
    a whole before any is stored: an invalid value never changes the defaults.
    Flags on a cell override these values for that cell only.
    """

    def __init__(self) -> None:
        self.values: dict[str, Any] = builtin_defaults()
        self._listeners: list[Callable[[], Callable[[str], None] | None]] = []

    # ------------------------------------------------------------------ reading
    @property
    def defaults(self) -> dict[str, Any]:
        return builtin_defaults()

    def changed(self) -> dict[str, Any]:
        """Fields whose value differs from the built-in default."""
        base = builtin_defaults()
        return {k: v for k, v in self.values.items() if v != base[k]}

    def line(self) -> str:
        """The current defaults as a ``%%geprof`` flag line (only non-default values)."""
        return flag_line(self.values)

    # ------------------------------------------------------------------ writing
    def check(self, changes: dict[str, Any], base: dict[str, Any] | None = None) -> dict[str, Any]:
        """``base`` (default: the current values) with ``changes`` applied and validated; nothing is stored."""
        values = dict(self.values if base is None else base)
        for field, value in changes.items():
            values[field] = validate_config_field(field, value)
        schedule_from(values)
        # the device just set is the one refused; else the aic_metrics (as a %%geprof cell says it)
        blamed = "device" if "device" in changes and "aic_metrics" not in changes else "aic_metrics"
        _check_device_counters(values["aic_metrics"], values["device"], blamed)
        return values

    def update(self, changes: dict[str, Any], base: dict[str, Any] | None = None) -> None:
        """Validate and store ``changes`` (over ``base``); :class:`ConfigError` leaves the values as they were."""
        values = self.check(changes, base)
        if values != self.values:
            self.values = values
            self._notify("values")

    def reset(self) -> None:
        """Back to the built-in defaults."""
        self.update({}, base=builtin_defaults())

    def parse_line(self, line: str) -> tuple[dict[str, Any], list[str]]:
        """The fields a ``%%geprof`` flag line sets, and the per-cell flags it had (which are ignored).

        The line is parsed by the magic's own argparse parser (so the grammar is
        the cell magic's); a leading ``%%geprof`` is allowed.  Errors are
        ``UsageError`` with argparse's message naming the flag.
        """
        text = line.strip()
        for prefix in ("%%geprof", "%geprof"):
            if text.startswith(prefix):
                text = text[len(prefix):]
                break
        args = parse_flags(_flag_line_parser, text)
        fields = {field: getattr(args, field) for field in CONFIG_FIELDS if getattr(args, field, None) is not None}
        ignored = [flag for dest, flag in CELL_ONLY.items() if getattr(args, dest, None) not in (None, False)]
        return fields, ignored

    def set_line(self, line: str, merge: bool = False) -> list[str]:
        """Set the defaults to a flag line: the line's values, every other field at its default
        (``merge``: other fields keep their current value).  Returns the ignored per-cell flags."""
        fields, ignored = self.parse_line(line)
        self.update(fields, base=None if merge else builtin_defaults())
        return ignored

    # ---------------------------------------------------------------- listeners
    def add_listener(self, callback: Callable[[str], None]) -> None:
        """``callback(event)`` after a change (``"values"``) or a ``%%geprof`` cell (``"cell"``); held weakly
        when it is a bound method."""
        ref = weakref.WeakMethod(callback) if hasattr(callback, "__self__") else (lambda: callback)
        self._listeners.append(ref)

    def _notify(self, event: str) -> None:
        alive = []
        for ref in self._listeners:
            cb = ref()
            if cb is not None:
                alive.append(ref)
                cb(event)
        self._listeners = alive

    def cell_ran(self) -> None:
        self._notify("cell")


@dataclass
class CellSettings:
    """What one ``%%geprof`` cell runs with: the panel's defaults with the cell's flags over them."""

    values: dict[str, Any]
    options: ProfilingOptions
    schedule: StepSchedule | None

    @property
    def line(self) -> str:
        """The equivalent flag line (non-default values only)."""
        return flag_line(self.values)

    def simulation(self) -> dict[str, str | None]:
        return {"executor": self.values["executor"] or None, "clock_mode": self.values["clock"] or None,
                "device": self.values["device"] or None, "ranks": self.values[RANKS_FIELD] or None}


def _check_device_counters(aic_metrics: str, device: str, field: str = "aic_metrics") -> None:
    """ConfigError if ``--device``'s AI Core counters have no ``--aic-metrics`` group (L2Cache and
    MemoryAccess need an A2-class chip), naming ``field`` (the one just set); without ``--device``
    GE checks it when the cell initialises."""
    if not device:
        return
    try:
        preset = get_device(device)
    except ValueError:  # a bad --device is named where the simulation settings are applied
        return
    try:
        check_aic_metrics(preset, aic_metrics)
    except ProfilingOptionsError as exc:
        if field == "device":
            having = [name for name, p in PRESETS.items()
                      if not events.lacks_counter_group(aic_metrics, p.chip_family)]
            raise ConfigError(field, f"{device!r} has no --aic-metrics {aic_metrics} counters; accepted: "
                                     f"{', '.join(having)} (or another --aic-metrics first)") from None
        raise ConfigError("aic_metrics", f"{aic_metrics!r} is not available on --device {device}; "
                                         f"accepted there: {exc.accepted}") from None


def cell_settings(args: argparse.Namespace, store: ConfigStore | None) -> CellSettings:
    """Merge the cell's flags over the stored defaults; ``UsageError`` naming the flag if invalid."""
    values = dict(store.values if store is not None else builtin_defaults())
    for field in CONFIG_FIELDS:
        v = getattr(args, field, None)
        if v is not None:
            values[field] = v
    try:
        options = options_from_args(args, values)
        schedule = schedule_from(values)
        _check_device_counters(options.aic_metrics, values["device"])
    except ProfilingOptionsError as exc:
        raise UsageError(str(exc)) from None
    except ConfigError as exc:
        message = str(exc)
        if store is not None and getattr(args, exc.field, None) is None and exc.field in store.changed():
            # the conflict is between this cell's flags and a stored default: say where that value is from
            message += (f" ({exc.flag} {values[exc.field]} is a %geprof config default: change it there, or "
                        "set it on this cell)")
        raise UsageError(message) from None
    return CellSettings(values, options, schedule)
