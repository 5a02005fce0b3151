"""``%geprof <command>``: the line magic's commands (config, show, load, export, compare, advise, whatif, help).

Each command is a small argparse sub-parser; a bad command line is a
``UsageError`` that shows the command's usage, never a traceback.
"""

from __future__ import annotations

import argparse
import keyword
import shlex
from pathlib import Path
from typing import Any

from IPython.core.error import UsageError
from IPython.display import display

from ..analysis import ClusterProfile, Profile, RunDirError, load
from ..analysis.export import FORMATS as EXPORT_FORMATS
from ..analysis.export import RANK_DEFAULTS, write_failure
from ..analysis.export.ascend_pt import rank_argument
from ..analysis.export.cluster import FORMATS as CLUSTER_EXPORT_FORMATS
from ..analysis.timing.what_if import LINK_TYPES, validate
from . import display as nb_display

DEFAULT_NAME = "_geprof"
#: What ``%geprof load`` and a path given as a name accept.
LOADABLE = ("a run directory (PROF_*), an output directory (its newest run), a CLUSTER_* directory, real msprof "
            "(mindstudio_profiler_output) or torch_npu (*_ascend_pt) output, or a .geprof_parquet export")


class _HelpShown(Exception):
    """``-h`` printed a help text (argparse would sys.exit)."""


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)  # a flag is named in full: --form is not --format
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> None:  # argparse would sys.exit
        raise UsageError(f"{message}\n\n{self.format_usage()}")

    def exit(self, status: int = 0, message: str | None = None) -> None:  # after -h
        if message:
            print(message)
        raise _HelpShown


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="%geprof", description="Work with geprof Profiles in the notebook "
                     "(%%geprof over a cell collects one).")
    sub = parser.add_subparsers(dest="command", parser_class=_Parser)
    p = sub.add_parser("config", help="the options panel: defaults of later %%%%geprof cells; with flags, set "
                       "those defaults (e.g. config --aic-metrics Memory --active 3)")
    p.add_argument("--reset", action="store_true", help="back to the built-in defaults (then apply any flags)")
    p.add_argument("flags", nargs="*", metavar="FLAG", help="%%%%geprof flags to make the defaults")
    p = sub.add_parser("show", help="show a Profile's report (default: _geprof)")
    p.add_argument("name", nargs="?", default=DEFAULT_NAME, help="a Profile variable or a path to load")
    p = sub.add_parser("load", help="open a run, an output directory, real msprof or torch_npu output")
    p.add_argument("path", help=LOADABLE)
    p.add_argument("-o", dest="bind", default=None, metavar="NAME", help="also bind it to NAME")
    p = sub.add_parser("export", help="write a Profile in a real tool's format")
    p.add_argument("name", nargs="?", default=DEFAULT_NAME, help="a Profile variable or a path to load")
    p.add_argument("--format", choices=EXPORT_FORMATS, default=None,
                   help="default: msprof (a ClusterProfile: ascend_pt, one directory per rank)")
    p.add_argument("--to", default="geprof_export", metavar="DIR", help="directory to write into")
    p.add_argument("--rank", type=rank_argument, default=None, metavar="N",
                   help="ascend_pt, db, msprof_db: the rank this run is exported as (default 0; msprof_db: none; a "
                        "ClusterProfile's ranks keep theirs)")
    p = sub.add_parser("compare", help="how profile B differs from profile A (variables or paths), side by side")
    p.add_argument("a", help="the base run: a Profile variable or a path to load")
    p.add_argument("b", nargs="?", default=None,
                   help="the run compared with it (B - A); without it, --steps compares two steps of A")
    p.add_argument("--steps", type=int, nargs=2, default=None, metavar=("I", "J"),
                   help="compare step I of A with step J of B (of A without B)")
    p = sub.add_parser("advise", help="findings ranked High/Medium/Low with evidence and suggestions")
    p.add_argument("name", nargs="?", default=DEFAULT_NAME, help="a Profile variable or a path to load")
    p = sub.add_parser("whatif", help="what each step would take under a change (the dependency graph re-timed), "
                       "beside today's; e.g. whatif --speedup 'MatMul*=2' --host-gap-us 0")
    p.add_argument("name", nargs="?", default=DEFAULT_NAME, help="a Profile variable or a path to load")
    p.add_argument("--speedup", action="append", type=_pattern_factor, default=[], metavar="PATTERN=FACTOR",
                   help="ops whose type or name matches PATTERN (fnmatch) run FACTOR times faster; repeatable")
    p.add_argument("--remove", action="append", default=[], metavar="PATTERN",
                   help="ops whose type or name matches PATTERN take no time; repeatable")
    p.add_argument("--link", action="append", type=_pattern_factor, default=[], metavar="LINK=FACTOR",
                   help=f"a link type's bandwidth times FACTOR ({', '.join(LINK_TYPES)}); repeatable")
    p.add_argument("--host-gap-us", type=float, default=None, metavar="US",
                   help="cap every wait of the device for the host at US microseconds")
    p.add_argument("--device", default=None, metavar="SPEC", help="re-cost the kernels on another device")
    p.add_argument("--verify", action="store_true",
                   help="also re-simulate the run under the change and compare (a run simulated in this kernel)")
    sub.add_parser("help", help="this help, and the %%%%geprof flags")
    return parser


def _pattern_factor(text: str) -> tuple[str, float]:
    """``PATTERN=FACTOR`` of ``--speedup`` and ``--link`` (the last ``=`` splits: a pattern may hold one)."""
    pattern, eq, factor = text.rpartition("=")
    try:
        if eq:
            return pattern, float(factor)
    except ValueError:
        pass
    raise argparse.ArgumentTypeError(f"{text!r}: expected PATTERN=FACTOR, a number after the last '=', e.g. "
                                     "'MatMul*=2'")


#: The %geprof whatif flag of each Profile.what_if keyword, to name it in an error.
WHATIF_FLAGS = {"op_speedup": "--speedup", "remove_ops": "--remove", "link_bandwidth": "--link",
                "host_gap_us": "--host-gap-us", "device": "--device"}


def whatif_change(speedup: list[tuple[str, float]], remove: list[str], link: list[tuple[str, float]],
                  host_gap_us: float | None, device: str | None) -> dict:
    """The ``Profile.what_if`` keywords of the flags, each checked by :func:`~..analysis.timing.what_if.validate`
    (a UsageError names the flag, with validate's message); a pattern given twice is refused."""
    change: dict[str, Any] = {}
    for kw, pairs in (("op_speedup", speedup), ("link_bandwidth", link)):
        if pairs:
            seen = [p for p, _ in pairs]
            twice = sorted({p for p in seen if seen.count(p) > 1})
            if twice:
                raise UsageError(f"{WHATIF_FLAGS[kw]}: {', '.join(map(repr, twice))} given twice; give each "
                                 "pattern once")
            change[kw] = dict(pairs)
    if remove:
        change["remove_ops"] = remove
    if host_gap_us is not None:
        change["host_gap_us"] = host_gap_us
    if device is not None:
        change["device"] = device
    for kw, value in change.items():
        try:
            validate(**{kw: value})
        except (TypeError, ValueError) as exc:
            raise UsageError(f"{WHATIF_FLAGS[kw]}: {exc}") from None
    if not change:
        raise UsageError("%geprof whatif: give a change: --speedup PATTERN=FACTOR, --remove PATTERN, "
                         "--link LINK=FACTOR, --host-gap-us US or --device SPEC")
    return change


def whatif_command(profile: Profile | ClusterProfile, change: dict, verify: bool) -> Any:
    """``%geprof whatif``: the what-if view of ``profile`` under ``change``; a change the run refuses (a pattern
    that matches no op, a device it cannot be re-costed on) is a UsageError naming the flag."""
    from .whatif_view import WhatIfView

    try:
        what_if = profile.what_if(**change)
    except (TypeError, ValueError) as exc:
        flag = next((f for k, f in WHATIF_FLAGS.items() if str(exc).startswith(k)
                     or str(exc).startswith(f"what_if({k}")), "%geprof whatif")
        raise UsageError(f"{flag}: {exc}") from None
    return WhatIfView(profile, what_if, verify=verify)


def check_bind_name(name: str) -> str:
    """``-o NAME`` of ``%%geprof`` and ``%geprof load``: a name the notebook can then use (an
    identifier that is not a keyword); a UsageError otherwise."""
    if not name.isidentifier() or keyword.iskeyword(name):
        raise UsageError(f"-o NAME must be a Python identifier, got {name!r}"
                         + (" (a keyword)" if keyword.iskeyword(name) else ""))
    return name


def _load(path: str) -> Profile | ClusterProfile:
    """``load(path)``; a missing or unreadable path is a UsageError naming it and what is accepted."""
    try:
        return load(Path(path).expanduser())
    except FileNotFoundError:
        raise UsageError(f"{path}: the path does not exist; accepted: {LOADABLE}") from None
    except RunDirError as exc:  # the loader's message names the path and the layouts it knows
        raise UsageError(str(exc)) from None
    except OSError as exc:
        raise UsageError(f"{path}: cannot be read ({exc.strerror or exc}); accepted: {LOADABLE}") from None


def _profile(shell: Any, name: str, command: str) -> Profile | ClusterProfile:
    """The Profile (or ClusterProfile) bound to ``name`` in the notebook, or else the run at path
    ``name``.  Only ``show``, ``advise``, ``export`` and ``whatif`` take a ClusterProfile."""
    value = shell.user_ns.get(name)
    if value is None and (Path(name).expanduser().exists() or not name.isidentifier()):
        value = _load(name)  # a name that cannot be a variable is a path
    if isinstance(value, ClusterProfile) and command not in ("show", "advise", "export", "whatif"):
        one_rank = f"bind one rank first, e.g. r0 = {name}.rank(0)" if name in shell.user_ns else \
            "give one rank's run directory (rank_<r>/PROF_*)"
        raise UsageError(f"{name!r} is a ClusterProfile (ranks {list(value.ranks)}): %geprof {command} takes one "
                         f"run; {one_rank}")
    if not isinstance(value, (Profile, ClusterProfile)):
        found = sorted(k for k, v in shell.user_ns.items()
                       if isinstance(v, (Profile, ClusterProfile)) and not k.startswith("__"))
        hint = f"; Profiles here: {', '.join(found)}" if found else "; run a %%geprof cell or %geprof load first"
        raise UsageError(f"{name!r} is not a geprof Profile{hint}")
    return value


def export_command(profile: Profile | ClusterProfile, name: str, fmt: str | None, to: str, rank: int | None) -> None:
    """``%geprof export``: one run in any format; a ClusterProfile in the formats that keep its ranks."""
    if isinstance(profile, ClusterProfile):
        fmt = fmt or "ascend_pt"
        if fmt not in CLUSTER_EXPORT_FORMATS:
            raise UsageError(f"--format {fmt}: {name!r} is a ClusterProfile; accepted for a cluster: "
                             f"{', '.join(CLUSTER_EXPORT_FORMATS)} (for {fmt}, export one rank, e.g. "
                             f"{name}.rank(0).export({to!r}, format={fmt!r}))")
        if rank is not None:
            raise UsageError(f"--rank {rank}: {name!r} is a ClusterProfile, whose ranks are exported as their own "
                             "ranks; accepted: --rank for one run only")
        options = {}
    else:
        fmt = fmt or "msprof"
        rank = rank if rank is not None else RANK_DEFAULTS.get(fmt)
        options = {"rank": rank} if fmt in RANK_DEFAULTS and rank is not None else {}
    try:
        written = profile.export(Path(to).expanduser(), format=fmt, **options)
    except OSError as exc:
        raise UsageError(write_failure(exc, fmt, to)) from None
    print(f"{fmt} export written to {written}")


def compare_command(shell: Any, a: str, b: str | None, steps: list[int] | None) -> Any:
    """``%geprof compare A [B] [--steps I J]``: the compare view of two runs, or of two steps (of A, or one of
    each); its ``comparison`` holds the tables."""
    from .comparison_view import CompareView

    if b is None and steps is None:
        raise UsageError(f"%geprof compare {a}: give the run to compare it with (%geprof compare {a} B), or two of "
                         f"its steps (%geprof compare {a} --steps I J)")
    first = _profile(shell, a, "compare")
    second = first if b is None else _profile(shell, b, "compare")
    names = (a, a if b is None else b) if steps is None else (f"{a} step {steps[0]}", f"{b or a} step {steps[1]}")
    try:
        return CompareView(first, second, steps=tuple(steps) if steps else None, names=names)
    except (TypeError, ValueError) as exc:
        raise UsageError(f"%geprof compare: {exc}") from None


def config_command(store: Any, rest: str) -> Any:
    """``%geprof config [--reset] [FLAGS]``: show the options panel, reset or set the defaults."""
    from . import panel

    try:
        tokens = shlex.split(rest)
    except ValueError as exc:
        raise UsageError(f"cannot parse the command line: {exc}") from None
    if "-h" in tokens or "--help" in tokens:
        try:
            build_parser().parse_args(["config", "-h"])
        except _HelpShown:
            return None
    reset = "--reset" in tokens
    if reset:
        rest = " ".join(shlex.quote(t) for t in tokens if t != "--reset")
    if not rest.strip():
        if reset:
            store.reset()
            print("%%geprof defaults reset to the built-in ones")
            return None
        display(panel.ConfigPanel(store))
        return None
    try:
        ignored = store.set_line(rest, merge=not reset)
    except panel.ConfigError as exc:
        raise UsageError(str(exc)) from None
    if ignored:
        print(f"ignored (they belong to one cell): {', '.join(ignored)}")
    print(f"%%geprof defaults: {store.line() or '(the built-in ones)'}")
    return None


def run(shell: Any, line: str, cell_magic_help: str, config: Any = None) -> Any:
    """Execute one ``%geprof`` command line; returns what the command shows, if anything.

    ``config`` is the :class:`~.config.ConfigStore` that ``%geprof config`` shows and sets.
    """
    head, _, rest = line.strip().partition(" ")
    if head == "config" and config is not None:
        return config_command(config, rest)
    parser = build_parser()
    try:
        args = parser.parse_args(shlex.split(line))
    except ValueError as exc:  # unbalanced quotes
        raise UsageError(f"cannot parse the command line: {exc}") from None
    except _HelpShown:
        return None
    if args.command in (None, "help"):
        print(parser.format_help())
        print(cell_magic_help)
        return None
    if args.command == "show":
        nb_display.show_profile(_profile(shell, args.name, "show"))
    elif args.command == "load":
        if args.bind is not None:
            check_bind_name(args.bind)
        profile = _load(args.path)
        shell.user_ns[DEFAULT_NAME] = profile
        if args.bind:
            shell.user_ns[args.bind] = profile
        display(profile)
    elif args.command == "export":
        export_command(_profile(shell, args.name, "export"), args.name, args.format, args.to, args.rank)
        return None
    elif args.command == "compare":
        return compare_command(shell, args.a, args.b, args.steps)
    elif args.command == "advise":
        return _profile(shell, args.name, "advise").advise()
    elif args.command == "whatif":
        change = whatif_change(args.speedup, args.remove, args.link, args.host_gap_us, args.device)
        return whatif_command(_profile(shell, args.name, "whatif"), change, args.verify)
    return None
