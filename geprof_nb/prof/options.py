"""``ProfilingOptions``: the profilingOptions JSON, validated, and where it comes from.

Sources, highest priority first (GE ``ProfilingInit``):

1. GE options ``ge.exec.profilingMode == "1"`` with ``ge.exec.profilingOptions``;
2. the environment: ``PROFILING_MODE == "true"`` with ``PROFILING_OPTIONS`` (the
   names the real GE code reads) or ``GE_PROFILING_MODE`` / ``GE_PROFILING_OPTIONS``
   (the names in GE's design doc); empty options there mean the default string;
3. otherwise profiling is off.

Every field of the GE docs is validated; a bad value raises
:class:`ProfilingOptionsError` naming the field and what it accepts.  Unknown
fields only warn.  One deliberate difference from GE's own parser: it rejects
``"training_trace": "off"`` although its docs allow it; we accept ``"off"``.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import warnings
from dataclasses import asdict, dataclass, fields
from typing import Any, Mapping

from . import events, json_text

OPTION_PROFILING_MODE = "ge.exec.profilingMode"
OPTION_PROFILING_OPTIONS = "ge.exec.profilingOptions"
OPTION_FP_POINT = "ge.exec.profilingFpPointOptions"
OPTION_BP_POINT = "ge.exec.profilingBpPointOptions"

ENV_MODE_NAMES = ("PROFILING_MODE", "GE_PROFILING_MODE")
ENV_OPTIONS_NAMES = ("PROFILING_OPTIONS", "GE_PROFILING_OPTIONS")
#: The output root when the options name none (an ``output`` field overrides it).
ENV_WORK_PATH = "ASCEND_WORK_PATH"

#: Used when the environment switches profiling on with empty options (GE profiling_init.cc).
DEFAULT_ENV_OPTIONS = (
    '{"output":"./","training_trace":"on","task_trace":"on","hccl":"on","aicpu":"on",'
    '"aic_metrics":"PipeUtilization","msproftx":"off"}'
)

ON_OFF = ("on", "off")
TASK_TRACE_LEVELS = ("on", "off", "l0", "l1")
GE_API_LEVELS = ("off", "l0", "l1")
TRAINING_TRACE_VALUES = ("on", "off", "")
STORAGE_LIMIT_MIN_MB = 200
STORAGE_LIMIT_MAX_MB = 4294967295
#: ``checkpoint_interval`` (seconds between a run's timed checkpoints, a geprof extension): its range.
CHECKPOINT_INTERVAL_MIN_S, CHECKPOINT_INTERVAL_MAX_S = 0.1, 3600.0
CUSTOM_EVENT_MIN, CUSTOM_EVENT_MAX = 0x1, 0x6E

#: Integer-valued sampling fields: (min, max).
FREQ_FIELDS = {
    "sys_hardware_mem_freq": (1, 100),
    "sys_io_sampling_freq": (1, 100),
    "sys_interconnection_freq": (1, 50),
    "dvpp_freq": (1, 100),
    "instr_profiling_freq": (300, 30000),
    "host_sys_usage_freq": (1, 50),
}
HOST_SYS_ITEMS = ("cpu", "mem", "disk", "network", "osrt")
HOST_SYS_USAGE_ITEMS = ("cpu", "mem")


class ProfilingOptionsError(ValueError):
    """A profiling option has a bad value; ``field`` names it, ``accepted`` says what works
    (``choices``: the values, for a field that takes one of a list)."""

    def __init__(self, field: str, message: str, accepted: str = "", choices: tuple[str, ...] = ()) -> None:
        self.field = field
        self.message = message
        self.accepted = accepted
        self.choices = choices
        text = f"profiling option {field!r}: {message}"
        if accepted:
            text += f"; accepted: {accepted}"
        super().__init__(text)


def _choices(values: tuple[str, ...]) -> str:
    return ", ".join(repr(v) for v in values)


@dataclass(frozen=True)
class ProfilingOptions:
    """The validated profilingOptions; defaults are GE's."""

    output: str = "./"
    storage_limit: str = ""
    training_trace: str = "off"
    task_trace: str = "on"
    ge_api: str = "off"
    hccl: str = "off"
    aicpu: str = "off"
    fp_point: str = ""
    bp_point: str = ""
    aic_metrics: str = "PipeUtilization"
    l2: str = "off"
    msproftx: str = "off"
    runtime_api: str = "off"
    #: geprof extension: msprof's PROF_TASK_MEMORY switch (GE's profilingOptions have no field for it).
    task_memory: str = "off"
    #: geprof extension: seconds between the run's timed checkpoints ("": msprof's default, 1 s).
    checkpoint_interval: str = ""
    sys_hardware_mem_freq: str = ""
    llc_profiling: str = ""
    sys_io_sampling_freq: str = ""
    sys_interconnection_freq: str = ""
    dvpp_freq: str = ""
    instr_profiling: str = "off"
    instr_profiling_freq: str = ""
    host_sys: str = ""
    host_sys_usage: str = ""
    host_sys_usage_freq: str = ""

    # ------------------------------------------------------------ derived views
    @property
    def task_level(self) -> str:
        """``off``, ``l0`` or ``l1`` (``on`` means ``l1``)."""
        return "l1" if self.task_trace == "on" else self.task_trace

    @property
    def training_trace_on(self) -> bool:
        return self.training_trace == "on"

    @property
    def storage_limit_mb(self) -> int | None:
        return int(self.storage_limit[:-2]) if self.storage_limit else None

    def data_type_config(self) -> int:
        """The msprof switch (``ProfDataTypeConfig`` / ``PROF_*_MASK`` bits) these options ask for."""
        bits = 0
        level = self.task_level
        if level != "off":
            bits |= events.PROF_ACL_API_MASK | events.PROF_TASK_TIME_MASK
        if level == "l1":
            bits |= events.PROF_TASK_TIME_L1_MASK
            if self.aic_metrics:
                bits |= events.PROF_AICORE_METRICS_MASK
        for name, mask in (
            ("aicpu", events.PROF_AICPU_TRACE_MASK),
            ("l2", events.PROF_L2CACHE_MASK),
            ("hccl", events.PROF_HCCL_TRACE_MASK),
            ("msproftx", events.PROF_MSPROFTX_MASK),
            ("runtime_api", events.PROF_RUNTIME_API_MASK),
            ("task_memory", events.PROF_TASK_MEMORY_MASK),
        ):
            if getattr(self, name) == "on":
                bits |= mask
        if self.training_trace_on:
            bits |= events.PROF_TRAINING_TRACE_MASK
        if self.ge_api in ("l0", "l1"):
            bits |= events.PROF_GE_API_L0_MASK
        if self.ge_api == "l1":
            bits |= events.PROF_GE_API_L1_MASK
        return bits

    def to_dict(self) -> dict[str, str]:
        """Only the fields that differ from the defaults, plus ``output``."""
        default = ProfilingOptions()
        out = {k: v for k, v in asdict(self).items() if v != getattr(default, k)}
        out["output"] = self.output
        return out

    def to_json(self) -> str:
        return json.dumps(self.to_dict())

    def replace(self, **changes: Any) -> "ProfilingOptions":
        merged = asdict(self)
        merged.update(changes)
        return ProfilingOptions.parse(merged)

    # ------------------------------------------------------------------ parsing
    @classmethod
    def parse(cls, data: str | Mapping[str, Any], source: str = OPTION_PROFILING_OPTIONS) -> "ProfilingOptions":
        """Parse and validate a profilingOptions JSON string or dict.

        ``source`` names where the JSON came from in errors about it as a whole (the GE option, or
        the environment variable that held it).  Without an ``output`` field the run goes under
        ``$ASCEND_WORK_PATH`` when that is set, else ``./`` (GE's order of precedence).
        """
        if isinstance(data, (str, bytes)):
            try:
                text = data.decode("utf-8") if isinstance(data, bytes) else data
            except UnicodeDecodeError as exc:
                raise ProfilingOptionsError(
                    source, f"is not UTF-8 text ({exc.reason} at byte {exc.start})",
                    "a JSON object in UTF-8") from None
            if not text.strip():
                raise ProfilingOptionsError(source, "is empty", "a JSON object")
            try:
                data = json_text.loads(text)
            except json_text.JsonTextError as exc:  # a key given twice too: which value was meant?
                raise ProfilingOptionsError(
                    source, f"is not valid JSON ({exc.reason})",
                    'a JSON object such as {"output": "./prof", "training_trace": "on"}') from None
        if not isinstance(data, Mapping):
            raise ProfilingOptionsError(
                source, f"must be a JSON object, got a JSON {_json_type(data)}",
                "a JSON object of option names to string values",
            )
        known = {f.name for f in fields(cls)}
        checked: dict[str, str] = {}  # as spelled (an alias apart from the field it sets)
        for key, value in data.items():
            name = _ALIASES.get(key, key)
            if name not in known:
                close = difflib.get_close_matches(str(key), sorted(known | set(_ALIASES)), n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                warnings.warn(f"profiling option {key!r} is not known to GE and is ignored{hint}", stacklevel=3)
                continue
            try:
                checked[key] = validate_field(name, value)
            except ProfilingOptionsError as exc:
                if key == name:
                    raise
                raise ProfilingOptionsError(key, exc.message, exc.accepted, exc.choices) from None
        for alias, name in _ALIASES.items():  # checked values: strings, whatever the JSON held
            if alias in checked and name in checked and checked[alias] != checked[name]:
                raise ProfilingOptionsError(alias, f"{checked[alias]!r} conflicts with {name} {checked[name]!r}",
                                            "one of them, or both with the same value")
        values = {_ALIASES.get(key, key): value for key, value in checked.items()}
        work_path = os.environ.get(ENV_WORK_PATH, "")
        if "output" not in values and work_path:
            _validate_output(work_path, ENV_WORK_PATH)
            values["output"] = work_path
        return cls(**values)

    @classmethod
    def resolve(cls, ge_options: Mapping[str, str] | None = None,
                environ: Mapping[str, str] | None = None) -> "ProfilingOptions | None":
        """The options in force: GE options, else the environment, else ``None`` (off)."""
        ge_options = ge_options or {}
        environ = os.environ if environ is None else environ
        mode = str(ge_options.get(OPTION_PROFILING_MODE, "0"))
        if mode not in ("0", "1"):
            raise ProfilingOptionsError(OPTION_PROFILING_MODE, f"{mode!r} is not valid", "'1' (on) or '0' (off)")
        if mode == "1":
            opts = cls.parse(ge_options.get(OPTION_PROFILING_OPTIONS, ""))
            points = {}
            for option, field in ((OPTION_FP_POINT, "fp_point"), (OPTION_BP_POINT, "bp_point")):
                if ge_options.get(option) not in (None, ""):
                    try:
                        points[field] = validate_field(field, ge_options[option])
                    except ProfilingOptionsError as exc:  # named as the user set it, not as the JSON field
                        raise ProfilingOptionsError(option, exc.message, exc.accepted) from None
            return opts.replace(**points) if points else opts
        for mode_name, opts_name in zip(ENV_MODE_NAMES, ENV_OPTIONS_NAMES):
            if environ.get(mode_name) == "true":
                return cls.parse(environ.get(opts_name) or DEFAULT_ENV_OPTIONS, source=opts_name)
        return None


#: Legacy spellings of fields: either may be given, or both with the same value.
_ALIASES = {"result_path": "output", "task_time": "task_trace"}
#: Fields whose empty value means "not set" (GE ignores them then).
_OPTIONAL_FIELDS = {"storage_limit", "checkpoint_interval", "llc_profiling", "host_sys", "host_sys_usage", *FREQ_FIELDS}


def validate_field(key: str, value: Any) -> str:
    """Check one profilingOptions field; return its canonical string value."""
    if value == "" and key in _OPTIONAL_FIELDS:
        return ""
    if key in FREQ_FIELDS:
        lo, hi = FREQ_FIELDS[key]
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            raise ProfilingOptionsError(key, f"must be an integer, got {_json_value(value)}", f"{lo}..{hi}")
        if isinstance(value, str) and not _ASCII_INT.fullmatch(value):
            # int() would also take "1_0" or Arabic-Indic digits, which GE's parser does not
            raise ProfilingOptionsError(key, f"{_shown(value)} is not a number", f"{lo}..{hi}")
        n = _whole(value)
        if n is None or not lo <= n <= hi:
            raise ProfilingOptionsError(key, f"{_shown(value) if n is None else n} is out of range", f"{lo}..{hi}")
        return str(n)
    if key == "checkpoint_interval":
        return _validate_checkpoint_interval(value)
    if not isinstance(value, str):
        raise ProfilingOptionsError(key, f"must be a string, got {_json_value(value)}", _ACCEPTED.get(key, "a string"))
    if key in ("output", "fp_point", "bp_point"):
        if key == "output":
            _validate_output(value)
        return value
    if key == "storage_limit":
        return _validate_storage_limit(value)
    if key == "aic_metrics":
        return _validate_aic_metrics(value)
    if key in ("host_sys", "host_sys_usage"):
        items = HOST_SYS_ITEMS if key == "host_sys" else HOST_SYS_USAGE_ITEMS
        parts = [p.strip() for p in value.split(",") if p.strip()]
        bad = [p for p in parts if p not in items]
        if bad or not parts:
            raise ProfilingOptionsError(key, f"{value!r} is not valid",
                                        "a comma-separated subset of " + ",".join(items))
        return ",".join(parts)
    allowed = _ENUM_FIELDS.get(key)
    if allowed is not None and value not in allowed:
        raise ProfilingOptionsError(key, f"{value!r} is not valid", _choices(allowed), allowed)
    return value


_JSON_TYPE_NAMES = ((bool, "boolean"), (int, "number"), (float, "number"), (str, "string"), (list, "array"),
                    (Mapping, "object"))


def _json_type(value: Any) -> str:
    """The JSON name of a parsed value's type (``array``, ``string``, ... rather than Python's)."""
    if value is None:
        return "null"
    return next((name for kind, name in _JSON_TYPE_NAMES if isinstance(value, kind)), type(value).__name__)


def _json_value(value: Any) -> str:
    """A parsed value as an error shows it: ``JSON null``, ``JSON number 1.5``, ``JSON boolean true`` (cut short,
    whatever its size or depth)."""
    if value is None:
        return "JSON null"
    return f"JSON {_json_type(value)} {json_text.excerpt(value)}"


_ASCII_INT = re.compile(r"\s*[+-]?[0-9]+\s*", re.ASCII)
#: More digits than any option's range: such a number is out of range without converting it (int() refuses
#: past 4300 digits).
_MAX_DIGITS = 12


def _whole(value: int | str) -> int | None:
    """An integer option's value (an int, or ASCII digits), None if it has more digits than any range takes."""
    if isinstance(value, str):
        digits = value.strip().lstrip("+-").lstrip("0")
        if len(digits) > _MAX_DIGITS:
            return None
    return int(value)


def _shown(text: str) -> str:
    """An option's text as an error quotes it: whole, or its ends if it is long."""
    return repr(text) if len(text) <= 40 else f"{text[:20]!r}...{text[-8:]!r} ({len(text)} characters)"


def _validate_output(value: str, field: str = "output") -> None:
    """A path the file system can take: not blank, no NUL byte, encodable for the OS.

    Checked here so that a bad ``output`` is a :class:`ProfilingOptionsError` at
    parse time, not a ``ValueError`` from ``mkdir`` inside ``GEInitialize``.
    """
    accepted = "a directory path (absolute or relative)"
    if not value.strip():
        raise ProfilingOptionsError(field, "is empty", accepted)
    if "\0" in value:
        raise ProfilingOptionsError(field, f"{value!r} contains a NUL byte", accepted + " without NUL bytes")
    try:
        os.fsencode(value)
    except UnicodeError:
        raise ProfilingOptionsError(field, f"{value!r} cannot be encoded as a file name",
                                    accepted + " of valid Unicode characters") from None


def _validate_storage_limit(value: str) -> str:
    m = re.fullmatch(r"\s*([0-9]+)\s*MB\s*", value, re.ASCII)
    accepted = f"'<n>MB' with {STORAGE_LIMIT_MIN_MB} <= n <= {STORAGE_LIMIT_MAX_MB}, e.g. '200MB'"
    if not m:
        raise ProfilingOptionsError("storage_limit", f"{_shown(value)} is not valid (the unit MB is required)",
                                    accepted)
    n = _whole(m.group(1))
    if n is None or not STORAGE_LIMIT_MIN_MB <= n <= STORAGE_LIMIT_MAX_MB:
        raise ProfilingOptionsError("storage_limit", f"{_shown(value) if n is None else f'{n}MB'} is out of range",
                                    accepted)
    return f"{n}MB"


_DECIMAL = re.compile(r"\s*\+?([0-9]+(\.[0-9]*)?|\.[0-9]+)\s*", re.ASCII)


def _validate_checkpoint_interval(value: Any) -> str:
    """Seconds as a JSON number or a decimal string, in range; its canonical text ("1", "0.5")."""
    accepted = f"seconds, {CHECKPOINT_INTERVAL_MIN_S:g} to {CHECKPOINT_INTERVAL_MAX_S:g}, e.g. '2' or '0.5'"
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ProfilingOptionsError("checkpoint_interval", f"must be a number of seconds, got {_json_value(value)}",
                                    accepted)
    if isinstance(value, str) and not _DECIMAL.fullmatch(value):  # float() would also take "nan", "1e3", "1_0"
        raise ProfilingOptionsError("checkpoint_interval", f"{value!r} is not a number of seconds", accepted)
    seconds = float(value)
    if not CHECKPOINT_INTERVAL_MIN_S <= seconds <= CHECKPOINT_INTERVAL_MAX_S:  # NaN too
        raise ProfilingOptionsError("checkpoint_interval", f"{value!r} is out of range", accepted)
    return f"{seconds:g}"


def _validate_aic_metrics(value: str) -> str:
    if value in events.AIC_METRICS:
        return value
    if value.startswith("Custom:"):
        regs = [r.strip() for r in value[len("Custom:"):].split(",") if r.strip()]
        accepted = f"'Custom:' and 1 to 8 hex event ids in [0x{CUSTOM_EVENT_MIN:X}, 0x{CUSTOM_EVENT_MAX:X}]"
        if not 1 <= len(regs) <= 8:
            raise ProfilingOptionsError("aic_metrics", f"{value!r} names {len(regs)} events", accepted)
        for r in regs:
            if not re.fullmatch(r"(0[xX])?[0-9a-fA-F]+", r, re.ASCII):  # int(r, 16) also takes "1_0"
                raise ProfilingOptionsError("aic_metrics", f"{r!r} is not a hex number", accepted)
            n = int(r, 16)
            if not CUSTOM_EVENT_MIN <= n <= CUSTOM_EVENT_MAX:
                raise ProfilingOptionsError("aic_metrics", f"event {r} is out of range", accepted)
        return "Custom:" + ",".join(f"0x{int(r, 16):x}" for r in regs)
    raise ProfilingOptionsError("aic_metrics", f"{value!r} is not valid",
                                _choices(events.AIC_METRICS) + ", or 'Custom:0x..'")


_ENUM_FIELDS: dict[str, tuple[str, ...]] = {
    "training_trace": TRAINING_TRACE_VALUES,
    "task_trace": TASK_TRACE_LEVELS,
    "ge_api": GE_API_LEVELS,
    "hccl": ON_OFF,
    "aicpu": ON_OFF,
    "l2": ON_OFF,
    "msproftx": ON_OFF,
    "runtime_api": ON_OFF,
    "task_memory": ON_OFF,
    "instr_profiling": ON_OFF,
    "llc_profiling": ("read", "write"),
}
_ACCEPTED: dict[str, str] = {k: _choices(v) for k, v in _ENUM_FIELDS.items()}
_ACCEPTED.update({
    "output": "a directory path", "fp_point": "an op name or ''", "bp_point": "an op name or ''",
    "aic_metrics": _choices(events.AIC_METRICS), "storage_limit": "'<n>MB', e.g. '200MB'",
    "checkpoint_interval": "seconds, e.g. '2'",
    "host_sys": "a comma-separated subset of " + ",".join(HOST_SYS_ITEMS),
    "host_sys_usage": "a comma-separated subset of " + ",".join(HOST_SYS_USAGE_ITEMS),
})
