"""``compare(a, b)``: how run ``b`` differs from run ``a``, from their tables only.

Op counts and times are per step of the op's own model (its op_summary time divided by that model's
iterations with op data), so runs of different lengths compare and a graph's ops read the same whatever
other graphs ran; averages are per call.  When a run has several models, ops and op types are kept
apart per model (``Model A`` / ``Model B`` columns): GE's model ids differ between runs of one
process, so the models of the two runs are matched by the op names they share.  ``Steps``, step
times and the step split (Computing, Communication(Not Overlapped), Free) are of the steps
step_breakdown counts: the main model's iterations when several graphs ran, and for the means only
whole step periods (not a first step, which spans only itself), as the advisor counts the step
length.  Ops and op types that one run lacks are kept, with zeros on the missing side and ``In``
saying where they ran, so two runs of different graphs compare too.  Works on imported msprof /
torch_npu data (no raw records).

``steps=(i, j)`` compares step ``i`` of ``a`` with step ``j`` of ``b`` (``b`` may be ``a``): the same tables of
those two steps' op rows (counts and times are the step's), and a step table of their own rows
(Iteration Time, step period, split, op tasks and time).
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from .arguments import member, positive_integer
from .cluster.profile import ClusterProfile
from .findings.advisor import pmu_metric
from .profile import Profile
from .tables.breakdown import main_model, step_periods
from .tables.text_columns import distinct_texts, text_codes

#: Rows of the regression / improvement tables.
TOP_N = 10
#: A PMU ratio (0..1) that moved less than this is unchanged (cube_utilization(%): 100x, in percent):
#: two seeds of the same run differ by ~0.01.
PMU_MIN_CHANGE = 0.02
_DUR = "Task Duration(us)"
STATS = ["Count/step", "Time/step(us)", "Avg(us)"]
DIFF_COLUMNS = ["Count/step A", "Count/step B", "Time/step A(us)", "Time/step B(us)", "Avg A(us)", "Avg B(us)",
                "Count/step Diff", "Time/step Diff(us)", "Time/step Diff(%)", "Avg Diff(us)", "In"]
STEP_COLUMNS = ["A", "B", "Diff", "Diff(%)"]
PMU_COLUMNS = ["OP Type", "Metric", "A", "B", "Diff"]
#: The columns the op and op type tables start with when a run has several models: the row's Model ID
#: in each run (<NA> where that run lacks the model).
MODEL_COLUMNS = ["Model A", "Model B"]
#: Step metrics that are counts: shown as whole numbers, not with 3 decimals.
COUNT_METRICS = ("Steps", "Op tasks")
#: The parts of a step (step_breakdown's columns), bottom up.
SPLIT_PARTS = ("Computing", "Communication(Not Overlapped)", "Free")


@dataclass
class Comparison:
    """The differences of run ``b`` against run ``a`` (``Diff`` = B - A)."""

    a_name: str
    b_name: str
    step: pd.DataFrame  # one row per step metric: A, B, Diff, Diff(%)
    op_types: pd.DataFrame  # per OP Type (DIFF_COLUMNS), largest |time diff| first
    ops: pd.DataFrame  # per Op Name, with its OP Type
    regressions: pd.DataFrame  # the TOP_N ops whose time per step grew most
    improvements: pd.DataFrame  # the TOP_N ops whose time per step shrank most
    pmu: pd.DataFrame  # per OP Type and PMU metric that changed (PMU_COLUMNS; after MODEL_COLUMNS with several models)
    steps: tuple[int, int] | None = None  # (step of A, step of B) when two steps are compared, not two runs

    def split(self) -> pd.DataFrame:
        """Computing, Communication(Not Overlapped) and Free of A and B and the step they add up to, in us
        (:data:`STEP_COLUMNS`): the mean whole step period of each run, or the two steps compared; empty when
        a side has no step_breakdown."""
        suffix = "" if self.steps is not None else " mean"
        names = [f"{part}(us){suffix}" for part in SPLIT_PARTS]
        parts = self.step.reindex(names)[["A", "B"]]
        if parts.isna().any().any():
            return pd.DataFrame(columns=STEP_COLUMNS, index=pd.Index([], name="Part"))
        parts.index = pd.Index(SPLIT_PARTS, name="Part")
        parts.loc["Step"] = parts.sum()
        return _step_table({part: (r["A"], r["B"]) for part, r in parts.iterrows()}).rename_axis("Part")

    def summary(self) -> str:
        """A few lines for a terminal or a log."""
        lines = [f"geprof comparison: A = {self.a_name}, B = {self.b_name}"]
        for metric, r in self.step.iterrows():
            pct = f", {r['Diff(%)']:+.1f}%" if pd.notna(r["Diff(%)"]) else ""
            a, b, diff = _step_value(metric, r["A"]), _step_value(metric, r["B"]), _step_value(metric, r["Diff"], "+")
            lines.append(f"  {metric}: {a} -> {b} ({diff}{pct})")
        for title, frame in (("regressions", self.regressions), ("improvements", self.improvements)):
            if len(frame):
                lines.append(f"Top {title} (time per step):")
                lines += [f"  {name} [{r['OP Type']}{_model_text(r)}]: {r['Time/step A(us)']:,.3f} -> "
                          f"{r['Time/step B(us)']:,.3f} us ({r['Time/step Diff(us)']:+,.3f} us, {r['In']})"
                          for name, r in frame.head(5).iterrows()]
        if MODEL_COLUMNS[0] in self.ops:
            models = self.ops[MODEL_COLUMNS].drop_duplicates().sort_values(MODEL_COLUMNS, kind="stable")
            lines.append("Models (per-step values are per step of the op's model): "
                         + ", ".join(_model_text(r, "") for _, r in models.iterrows()))
        only = self.ops["In"].value_counts()
        if only.get("A only", 0) or only.get("B only", 0):
            lines.append(f"Ops only in A: {only.get('A only', 0)}, only in B: {only.get('B only', 0)}")
        if len(self.pmu):
            lines.append("Largest PMU changes:")
            lines += [f"  {r['OP Type']}{_model_text(r, ' in ')} {r['Metric']}: {r['A']:.3f} -> {r['B']:.3f} "
                      f"({r['Diff']:+.3f})" for _, r in self.pmu.head(5).iterrows()]
        return "\n".join(lines)

    def __repr__(self) -> str:
        return self.summary()

    def _repr_html_(self) -> str:
        """Notebook view; every name is escaped (op names come from the profiled graph)."""
        parts = [f"<h4>geprof comparison: A = {html.escape(self.a_name)}, B = {html.escape(self.b_name)}</h4>"]
        for title, frame in (("Step", step_cells(self.step)), ("Regressions", self.regressions),
                             ("Improvements", self.improvements), ("OP types", self.op_types.head(20)),
                             ("PMU changes", self.pmu.head(20))):
            if len(frame):
                parts.append(f"<h5>{title}</h5>" + frame.to_html(escape=True, float_format=lambda v: f"{v:,.3f}",
                                                                 na_rep="-"))
        return "\n".join(parts)


def _model_text(row: pd.Series, sep: str = ", ") -> str:
    """Which model a row of a several-model comparison is in each run: ``A 1 = B 2``, ``B 3``, ...
    (empty for a one-model comparison)."""
    if MODEL_COLUMNS[0] not in row:
        return ""
    sides = [f"{side} {row[c]}" for side, c in zip("AB", MODEL_COLUMNS) if pd.notna(row[c])]
    return sep + " = ".join(sides)


def _step_value(metric: str, value: float, sign: str = "") -> str:
    """A step-table value as text: counts (:data:`COUNT_METRICS`) whole, others with 3 decimals;
    ``sign="+"`` shows the sign of a difference."""
    if pd.isna(value):
        return "-"
    return format(value, f"{sign},.{0 if metric in COUNT_METRICS else 3}f")


def step_cells(step: pd.DataFrame) -> pd.DataFrame:
    """A step table (:data:`STEP_COLUMNS`) as text, for HTML: one number format per row (counts whole, times
    with 3 decimals and thousands separators, differences signed), ``-`` where there is no value."""
    out = step.astype(object)
    for metric in step.index:
        for col in ("A", "B", "Diff"):
            out.at[metric, col] = _step_value(metric, step.at[metric, col], "+" if col == "Diff" else "")
        pct = step.at[metric, "Diff(%)"]
        out.at[metric, "Diff(%)"] = "-" if pd.isna(pct) else f"{pct:+,.1f}"
    return out


@dataclass(frozen=True)
class _Rows:
    """The op rows one side of a comparison counts: a run's, or one step's of it, with each row's iteration."""

    ops: pd.DataFrame
    iterations: np.ndarray

    @classmethod
    def of(cls, profile: Profile, step: int | None = None) -> _Rows:
        ops, iterations = profile.op_summary, profile.iteration_of_ops.to_numpy()
        if step is None:
            return cls(ops, iterations)
        keep = iterations == step
        return cls(ops[keep], iterations[keep])


def _models(rows: _Rows) -> np.ndarray:
    """Each op row's Model ID (-1 where the data has none)."""
    ops = rows.ops
    if "Model ID" not in ops:
        return np.full(len(ops), -1, np.int64)
    return pd.to_numeric(ops["Model ID"], errors="coerce").fillna(-1).to_numpy(np.int64)


def _graph_numbers(models: np.ndarray, graph_of: dict[int, int]) -> np.ndarray:
    """Each row's graph (``graph_of``: Model ID -> graph), looked up once per distinct model."""
    distinct, of = np.unique(models, return_inverse=True)
    return np.array([graph_of[m] for m in distinct.tolist()], np.int64)[of.ravel()]


def _op_names_by_model(rows: _Rows) -> dict[int, set[str]]:
    """Per Model ID, the names of its ops (each distinct model and name once, not per row)."""
    texts, position = distinct_texts(rows.ops["Op Name"])
    pairs = pd.DataFrame({"model": _models(rows), "name": position}).drop_duplicates()
    names = texts.to_numpy(object)
    return {int(model): set(names[of.to_numpy()].tolist()) for model, of in pairs.groupby("model")["name"]}


def _model_steps(rows: _Rows) -> pd.Series:
    """Per Model ID: its iterations with op data, the divisor of its ops' per-step values."""
    frame = pd.DataFrame({"model": _models(rows), "iteration": rows.iterations})
    return frame.groupby("model")["iteration"].nunique()


def _main_steps(profile: Profile) -> int:
    """The main model's iterations with op data (:func:`.tables.breakdown.main_model`, whose iterations Iteration
    Time and the step split count); every iteration's without a step trace (0 for a run without any)."""
    model, steps = main_model(profile.step_trace), _model_steps(_Rows.of(profile))
    return int(steps[model]) if model in steps.index else len(profile.iterations)


def _op_time_per_step(rows: _Rows) -> float:
    """Op time per step, each model's over its own steps."""
    frame = pd.DataFrame({"model": _models(rows), "dur": rows.ops[_DUR].to_numpy(float)})
    return float((frame.groupby("model")["dur"].sum() / _model_steps(rows)).sum())


@dataclass(frozen=True)
class _Graphs:
    """The models of two runs matched up: ``pairs[k]`` is graph ``k``'s (Model ID in A, in B), None
    where that run lacks it; ``a`` and ``b`` map each run's Model IDs to their graph."""

    pairs: list[tuple[int | None, int | None]]
    a: dict[int, int]
    b: dict[int, int]


def _graphs(a: _Rows, b: _Rows) -> _Graphs | None:
    """None when neither run has several models (ops keyed by name, as one graph's are).  Otherwise the
    models that share the most op names are one graph, pair by pair (the same ids first among equals);
    a model sharing none with the other run's is its run's own."""
    na, nb = (_op_names_by_model(r) if len(r.ops) else {} for r in (a, b))
    if len(na) <= 1 and len(nb) <= 1:
        return None
    overlaps = sorted(((len(sa & sb), ma != mb, ma, mb) for ma, sa in na.items() for mb, sb in nb.items()),
                      key=lambda o: (-o[0], *o[1:]))
    pairs: list[tuple[int | None, int | None]] = []
    for shared, _, ma, mb in overlaps:
        if shared and all(ma != x and mb != y for x, y in pairs):
            pairs.append((ma, mb))
    paired_a, paired_b = {x for x, _ in pairs}, {y for _, y in pairs}
    pairs += [(m, None) for m in na if m not in paired_a] + [(None, m) for m in nb if m not in paired_b]
    return _Graphs(pairs, {x: k for k, (x, _) in enumerate(pairs) if x is not None},
                   {y: k for k, (_, y) in enumerate(pairs) if y is not None})


def _stats(rows: _Rows, key: str, graph_of: dict[int, int] | None = None) -> pd.DataFrame:
    """Per ``key`` value (per graph and ``key`` value with ``graph_of``, a run's Model ID -> graph): count
    and time per step of the op's model, average per call (and OP Type for ops).

    Rows are grouped by the key's text codes (:func:`.tables.text_columns.text_codes`: a million op rows hold a
    few hundred names) and the groups named after, in the order of their texts, as grouping by the texts
    would give; rows without a key are left out, as there."""
    ops = rows.ops
    keys = ["_graph", key] if graph_of is not None else [key]
    columns = STATS + (["OP Type"] if key == "Op Name" else [])
    if ops.empty:
        index = pd.MultiIndex.from_arrays([[], []], names=keys) if graph_of is not None else pd.Index([], name=key)
        return pd.DataFrame(columns=columns, index=index).astype({c: np.float64 for c in STATS})
    texts, code = text_codes(ops[key])
    models = _models(rows)
    frame = pd.DataFrame({key: code, "_model": models, "_dur": ops[_DUR].to_numpy(float)})
    if key == "Op Name":
        types, type_code = text_codes(ops["OP Type"])
        frame["_type"] = pd.Categorical.from_codes(type_code, categories=types)
    if graph_of is not None:
        frame["_graph"] = _graph_numbers(models, graph_of)
    per_model = frame.groupby([*keys, "_model"]).agg(count=("_dur", "size"), time=("_dur", "sum"))
    steps = _model_steps(rows).clip(lower=1).reindex(per_model.index.get_level_values("_model")).to_numpy()
    per_step = pd.DataFrame({"count": per_model["count"] / steps, "time": per_model["time"] / steps})
    summed = per_step.groupby(level=keys).sum()
    g = frame.groupby(keys)
    out = pd.DataFrame({"Count/step": summed["count"], "Time/step(us)": summed["time"], "Avg(us)": g["_dur"].mean()})
    if key == "Op Name":
        out["OP Type"] = g["_type"].first().astype(str)
    return _named(out, texts)[columns]


def _named(table: pd.DataFrame, texts: pd.Index) -> pd.DataFrame:
    """``table`` grouped by text codes (its last index level) with the codes replaced by their ``texts``
    and the rows in the order a groupby of the texts gives; a missing text's group (code -1) dropped."""
    codes = table.index.get_level_values(-1)
    table = table[codes >= 0]
    names = texts.take(codes[codes >= 0])
    if table.index.nlevels == 1:
        table.index = names.rename(table.index.name)
    else:
        table.index = pd.MultiIndex.from_arrays([table.index.get_level_values(0), names], names=table.index.names)
    return table.sort_index()


def _with_models(table: pd.DataFrame, graphs: _Graphs | None) -> pd.DataFrame:
    """A :func:`_diff` of per-graph stats with the graph level of its index as :data:`MODEL_COLUMNS`."""
    if graphs is None:
        return table
    graph = table.index.get_level_values("_graph").to_numpy()
    out = table.set_axis(table.index.get_level_values(1), axis=0)
    for column, side in reversed(list(zip(MODEL_COLUMNS, (0, 1)))):
        out.insert(0, column, pd.array([graphs.pairs[g][side] for g in graph.tolist()], dtype="Int64"))
    return out


def _diff(a: pd.DataFrame, b: pd.DataFrame) -> pd.DataFrame:
    """Outer join of two _stats frames with B - A differences, largest |time diff| first."""
    both = a[STATS].merge(b[STATS], how="outer", left_index=True, right_index=True, suffixes=(" A", " B"))
    out = pd.DataFrame(index=both.index)
    for s in STATS:
        name, unit = (s[:-4], "(us)") if s.endswith("(us)") else (s, "")
        out[f"{name} A{unit}"] = both[f"{s} A"]
        out[f"{name} B{unit}"] = both[f"{s} B"]
    in_a, in_b = both["Count/step A"].notna(), both["Count/step B"].notna()
    for col in ("Count/step A", "Count/step B", "Time/step A(us)", "Time/step B(us)"):
        out[col] = out[col].fillna(0.0)
    out["Count/step Diff"] = out["Count/step B"] - out["Count/step A"]
    out["Time/step Diff(us)"] = out["Time/step B(us)"] - out["Time/step A(us)"]
    with np.errstate(divide="ignore", invalid="ignore"):
        out["Time/step Diff(%)"] = np.where(out["Time/step A(us)"] > 0,
                                            out["Time/step Diff(us)"] / out["Time/step A(us)"] * 100, np.nan)
    out["Avg Diff(us)"] = out["Avg B(us)"] - out["Avg A(us)"]
    out["In"] = np.select([in_a & in_b, in_a], ["both", "A only"], "B only")
    if "OP Type" in a:  # per op: its type, from whichever run has it
        out.insert(0, "OP Type", a["OP Type"].combine_first(b["OP Type"]).reindex(out.index))
    order = out["Time/step Diff(us)"].abs().sort_values(ascending=False, kind="stable").index
    return out.loc[order]


def _iteration_times(profile: Profile) -> pd.Series:
    """Iteration Time (us) of each of the run's steps: step_trace's Iteration Time (model start to
    iteration end) of the model whose iterations step_breakdown counts, from the step bounds, so a
    second graph's iterations are not averaged in."""
    bounds = profile.source.step_bounds()
    length = bounds["end"].to_numpy(np.int64) - bounds["begin"].to_numpy(np.int64)
    return pd.Series(length[length > 0] / 1000.0)


def _step_times(a: Profile, b: Profile) -> tuple[str, pd.Series, pd.Series]:
    """Per-step times of both runs: the main model's Iteration Time when both have a step trace, else
    step_breakdown's Stage over whole step periods (:func:`.tables.breakdown.step_periods`; each iteration's
    window from its tasks when there is no step trace), so like meets like."""
    it = "Iteration Time(us)"
    ta, tb = a.step_trace, b.step_trace
    if it in ta and it in tb and ta[it].notna().any() and tb[it].notna().any():
        times_a, times_b = _iteration_times(a), _iteration_times(b)
        if len(times_a) and len(times_b):
            return it, times_a, times_b
    return "Stage(us)", _periods(a)["Stage"].dropna(), _periods(b)["Stage"].dropna()


def _periods(profile: Profile) -> pd.DataFrame:
    """step_breakdown's whole step periods, as the advisor's step length counts them."""
    return step_periods(profile.step_breakdown, profile.source.step_bounds())


def _step(a: Profile, b: Profile) -> pd.DataFrame:
    rows: dict[str, tuple[float, float]] = {"Steps": (_main_steps(a), _main_steps(b))}
    name, ta, tb = _step_times(a, b)
    rows[f"{name} mean"] = (ta.mean(), tb.mean())
    rows[f"{name} median"] = (ta.median(), tb.median())
    bd_a, bd_b = _periods(a), _periods(b)
    if len(bd_a) and len(bd_b):
        for col in SPLIT_PARTS:
            rows[f"{col}(us) mean"] = (bd_a[col].mean(), bd_b[col].mean())
    rows["Op time/step(us)"] = (_op_time_per_step(_Rows.of(a)), _op_time_per_step(_Rows.of(b)))
    return _step_table(rows)


def _step_table(rows: dict[str, tuple[float, float]]) -> pd.DataFrame:
    """The step table (:data:`STEP_COLUMNS`) of its metrics' A and B values."""
    out = pd.DataFrame.from_dict(rows, orient="index", columns=["A", "B"]).astype(float)
    out["Diff"] = out["B"] - out["A"]
    with np.errstate(divide="ignore", invalid="ignore"):
        out["Diff(%)"] = np.where(out["A"] != 0, out["Diff"] / out["A"] * 100, np.nan)
    out.index.name = "Metric"
    return out[STEP_COLUMNS]


def _one_step(profile: Profile, step: int, rows: _Rows) -> dict[str, float]:
    """What the step table says of one step: its Iteration Time (the main model's step_trace row), its period
    and split (its step_breakdown row), its op tasks and their time; NaN where the run has no such row."""
    st, sb = profile.step_trace, profile.step_breakdown
    values = dict.fromkeys(["Iteration Time(us)", "Stage(us)", *(f"{c}(us)" for c in SPLIT_PARTS)], np.nan)
    if len(st):
        trace = st[(st["Iteration ID"] == step) & (st["Model ID"] == main_model(st))]
        if len(trace):
            values["Iteration Time(us)"] = float(trace["Iteration Time(us)"].iloc[0])
    if len(sb) and (sb["Step"] == step).any():
        row = sb[sb["Step"] == step].iloc[0]
        values["Stage(us)"] = float(row["Stage"]) if "Stage" in row else float(sum(row[c] for c in SPLIT_PARTS))
        values.update({f"{c}(us)": float(row[c]) for c in SPLIT_PARTS})
    values["Op tasks"] = float(len(rows.ops))
    values["Op time(us)"] = float(rows.ops[_DUR].sum()) if len(rows.ops) else 0.0
    return values


def _step_of_steps(a: Profile, b: Profile, steps: tuple[int, int], rows: tuple[_Rows, _Rows]) -> pd.DataFrame:
    """The step table of step ``steps[0]`` of ``a`` against step ``steps[1]`` of ``b``."""
    va, vb = _one_step(a, steps[0], rows[0]), _one_step(b, steps[1], rows[1])
    return _step_table({metric: (va[metric], vb[metric]) for metric in va})


def _step_pair(steps: object, a: Profile, b: Profile) -> tuple[int, int] | None:
    """``steps`` as (a step of ``a``, a step of ``b``), each an iteration the run has; None for None; else a
    TypeError or ValueError naming ``steps`` and what is accepted."""
    if steps is None:
        return None
    if not (isinstance(steps, (tuple, list)) and len(steps) == 2):
        raise TypeError(f"steps must be two iteration ids (a step of a, a step of b), not {steps!r}")
    known = [np.union1d(p.iterations, p.step_trace["Iteration ID"].to_numpy(np.int64)) for p in (a, b)]
    return (member("steps[0]", steps[0], known[0], f"a ({a.name})", "iterations"),
            member("steps[1]", steps[1], known[1], f"b ({b.name})", "iterations"))


def _pmu_names(ops: pd.DataFrame) -> list[str]:
    """Canonical PMU ratio metrics of a run: ``aic_``/``aiv_`` prefixes dropped, so Atlas A2 and
    910A runs share names (each op's value comes from the core it ran on)."""
    names = []
    for c in ops.columns:
        if c.endswith(("_ratio", "_rate")) or c == "cube_utilization(%)":
            base = c[4:] if c.startswith(("aic_", "aiv_")) else c
            if base not in names:
                names.append(base)
    return names


def _pmu_means(rows: _Rows, graph_of: dict[int, int] | None = None) -> pd.DataFrame:
    """Mean of every PMU ratio per OP Type (per graph and OP Type with ``graph_of``; rows without the
    metric ignored)."""
    ops = rows.ops
    names = _pmu_names(ops)
    if not names:
        return pd.DataFrame()
    types, code = text_codes(ops["OP Type"])  # grouped by code, named after, as in _stats
    by = code if graph_of is None else [_graph_numbers(_models(rows), graph_of), code]
    # a metric at a time: a frame of them all would copy every row into one block first
    return _named(pd.DataFrame({n: pmu_metric(ops, n).groupby(by).mean() for n in names}), types)


def _pmu(a: _Rows, b: _Rows, graphs: _Graphs | None) -> pd.DataFrame:
    of_a, of_b = (graphs.a, graphs.b) if graphs is not None else (None, None)
    ma, mb = _pmu_means(a, of_a), _pmu_means(b, of_b)
    keys = ma.index.intersection(mb.index)
    metrics = [m for m in ma.columns if m in mb.columns]
    columns = (MODEL_COLUMNS if graphs is not None else []) + PMU_COLUMNS
    rows = []
    for k in keys:
        graph = list(graphs.pairs[k[0]]) if graphs is not None else []
        for m in metrics:
            va, vb = ma.at[k, m], mb.at[k, m]
            scale = 100.0 if m.endswith("(%)") else 1.0
            if pd.notna(va) and pd.notna(vb) and abs(vb - va) >= PMU_MIN_CHANGE * scale:
                rows.append((*graph, k[1] if graphs is not None else k, m, va, vb, vb - va))
    out = pd.DataFrame(rows, columns=columns)
    key = out["Diff"].abs() / np.where(out["Metric"].str.endswith("(%)"), 100.0, 1.0)
    return out.iloc[np.argsort(-key.to_numpy(), kind="stable")].reset_index(drop=True)


def _one_run(name: str, value: object) -> Profile:
    """``value`` if it is one run's Profile; else a TypeError naming the argument ``name`` and what to pass."""
    if isinstance(value, Profile):
        return value
    if isinstance(value, ClusterProfile):
        raise TypeError(f"{name} is a ClusterProfile ({value.name}); compare takes one run's Profile: pass one "
                        f"rank, e.g. {name}=cluster.rank({min(value.ranks, default=0)})")
    hint = f": load it first, {name}=geprof_nb.load({str(value)!r})" if isinstance(value, (str, Path)) else ""
    raise TypeError(f"{name} must be a Profile, not {type(value).__name__}{hint}")


def _labels(names: object) -> tuple[str, str] | None:
    """``names`` as the two runs' labels (None: their run names); else a TypeError naming ``names``."""
    if names is None:
        return None
    if not (isinstance(names, (tuple, list)) and len(names) == 2 and all(isinstance(n, str) for n in names)):
        raise TypeError(f"names must be two strings (a label for a and one for b), not {names!r}")
    return names[0], names[1]


def compare(a: Profile, b: Profile, top: int = TOP_N, names: tuple[str, str] | None = None,
            steps: tuple[int, int] | None = None) -> Comparison:
    """How Profile ``b`` differs from Profile ``a`` (``Diff`` = B - A); ``names`` label the two
    runs (default: their run names); ``top`` (a positive int): rows of the regression and
    improvement tables.  ``steps`` (an iteration of ``a``, one of ``b``; ``b`` may be ``a``) compares
    those two steps instead of the two runs: each one's ops, time, split and PMU ratios.  A wrong
    argument is a TypeError or ValueError naming it."""
    a, b = _one_run("a", a), _one_run("b", b)
    top, names, steps = positive_integer("top", top), _labels(names), _step_pair(steps, a, b)
    rows = (_Rows.of(a, steps[0]), _Rows.of(b, steps[1])) if steps is not None else (_Rows.of(a), _Rows.of(b))
    graphs = _graphs(*rows)
    of_a, of_b = (graphs.a, graphs.b) if graphs is not None else (None, None)
    ops = _with_models(_diff(_stats(rows[0], "Op Name", of_a), _stats(rows[1], "Op Name", of_b)), graphs)
    op_types = _with_models(_diff(_stats(rows[0], "OP Type", of_a), _stats(rows[1], "OP Type", of_b)), graphs)
    grew = ops[ops["Time/step Diff(us)"] > 0].sort_values("Time/step Diff(us)", ascending=False, kind="stable")
    shrank = ops[ops["Time/step Diff(us)"] < 0].sort_values("Time/step Diff(us)", kind="stable")
    if names is None:
        names = (a.name, b.name) if steps is None else (f"{a.name} step {steps[0]}", f"{b.name} step {steps[1]}")
    step = _step(a, b) if steps is None else _step_of_steps(a, b, steps, rows)
    return Comparison(a_name=names[0], b_name=names[1], step=step, op_types=op_types, ops=ops,
                      regressions=grew.head(top), improvements=shrank.head(top), pmu=_pmu(*rows, graphs), steps=steps)
