"""``compare(a, b)``: how run ``b`` differs from run ``a``, from their tables only.

Op counts and times are per step (op_summary time divided by the number of iterations with op
data), so runs of different lengths compare; averages are per call.  Step times and the step split
(Computing, Communication(Not Overlapped), Free) are of the steps step_breakdown counts: the main
model's iterations when several graphs ran, and only whole step periods (not a first step, which
spans only itself), as the advisor counts the step length.  Ops and op types that one
run lacks are kept, with zeros on the missing side and ``In`` saying where they ran, so two runs of
different graphs compare too.  Works on imported msprof / torch_npu data (no raw records).
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from .advisor import pmu_metric
from .breakdown import step_periods

if TYPE_CHECKING:
    from .profile import Profile

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
#: Step metrics that are counts: shown as whole numbers, not with 3 decimals.
COUNT_METRICS = ("Steps",)


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
    pmu: pd.DataFrame  # per OP Type and PMU metric that changed (PMU_COLUMNS)

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
                lines += [f"  {name} [{r['OP Type']}]: {r['Time/step A(us)']:,.3f} -> {r['Time/step B(us)']:,.3f} us "
                          f"({r['Time/step Diff(us)']:+,.3f} us, {r['In']})" for name, r in frame.head(5).iterrows()]
        only = self.ops["In"].value_counts()
        if only.get("A only", 0) or only.get("B only", 0):
            lines.append(f"Ops only in A: {only.get('A only', 0)}, only in B: {only.get('B only', 0)}")
        if len(self.pmu):
            lines.append("Largest PMU changes:")
            lines += [f"  {r['OP Type']} {r['Metric']}: {r['A']:.3f} -> {r['B']:.3f} ({r['Diff']:+.3f})"
                      for _, r in self.pmu.head(5).iterrows()]
        return "\n".join(lines)

    def __repr__(self) -> str:
        return self.summary()

    def _repr_html_(self) -> str:
        """Notebook view; every name is escaped (op names come from the profiled graph)."""
        parts = [f"<h4>geprof comparison: A = {html.escape(self.a_name)}, B = {html.escape(self.b_name)}</h4>"]
        for title, frame in (("Step", _step_cells(self.step)), ("Regressions", self.regressions),
                             ("Improvements", self.improvements), ("OP types", self.op_types.head(20)),
                             ("PMU changes", self.pmu.head(20))):
            if len(frame):
                parts.append(f"<h5>{title}</h5>" + frame.to_html(escape=True, float_format=lambda v: f"{v:,.3f}",
                                                                 na_rep="-"))
        return "\n".join(parts)


def _step_value(metric: str, value: float, sign: str = "") -> str:
    """A step-table value as text: counts (:data:`COUNT_METRICS`) whole, others with 3 decimals;
    ``sign="+"`` shows the sign of a difference."""
    if pd.isna(value):
        return "-"
    return format(value, f"{sign},.{0 if metric in COUNT_METRICS else 3}f")


def _step_cells(step: pd.DataFrame) -> pd.DataFrame:
    """The step table as text for HTML (one float format per row, so counts stay whole)."""
    out = step.astype(object)
    for metric in step.index:
        for col in ("A", "B", "Diff"):
            out.at[metric, col] = _step_value(metric, step.at[metric, col], "+" if col == "Diff" else "")
    return out


def _steps(profile: Profile) -> int:
    """Iterations with op data, the divisor of per-step values (at least 1, so an empty run's are 0)."""
    return max(1, len(profile.iterations))


def _stats(profile: Profile, key: str) -> pd.DataFrame:
    """Per ``key`` value: count and time per step, average per call (and OP Type for ops)."""
    ops = profile.op_summary
    if ops.empty:
        return pd.DataFrame(columns=STATS + (["OP Type"] if key == "Op Name" else []))
    steps = _steps(profile)
    g = ops.assign(_key=ops[key].astype(str)).groupby("_key")
    out = pd.DataFrame({"Count/step": g.size() / steps, "Time/step(us)": g[_DUR].sum() / steps,
                        "Avg(us)": g[_DUR].mean()})
    if key == "Op Name":
        out["OP Type"] = g["OP Type"].first().astype(str)
    out.index.name = key
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
    step_breakdown's Stage over whole step periods (:func:`.breakdown.step_periods`; each iteration's
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
    rows: dict[str, tuple[float, float]] = {"Steps": (len(a.iterations), len(b.iterations))}
    name, ta, tb = _step_times(a, b)
    rows[f"{name} mean"] = (ta.mean(), tb.mean())
    rows[f"{name} median"] = (ta.median(), tb.median())
    bd_a, bd_b = _periods(a), _periods(b)
    if len(bd_a) and len(bd_b):
        for col in ("Computing", "Communication(Not Overlapped)", "Free"):
            rows[f"{col}(us) mean"] = (bd_a[col].mean(), bd_b[col].mean())
    rows["Op time/step(us)"] = (a.op_summary[_DUR].sum() / _steps(a), b.op_summary[_DUR].sum() / _steps(b))
    out = pd.DataFrame.from_dict(rows, orient="index", columns=["A", "B"]).astype(float)
    out["Diff"] = out["B"] - out["A"]
    with np.errstate(divide="ignore", invalid="ignore"):
        out["Diff(%)"] = np.where(out["A"] != 0, out["Diff"] / out["A"] * 100, np.nan)
    out.index.name = "Metric"
    return out[STEP_COLUMNS]


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


def _pmu_means(profile: Profile) -> pd.DataFrame:
    """Mean of every PMU ratio per OP Type (rows without the metric ignored)."""
    ops = profile.op_summary
    names = _pmu_names(ops)
    if not names:
        return pd.DataFrame()
    values = pd.DataFrame({n: pmu_metric(ops, n) for n in names})
    return values.groupby(ops["OP Type"].astype(str).to_numpy()).mean()


def _pmu(a: Profile, b: Profile) -> pd.DataFrame:
    ma, mb = _pmu_means(a), _pmu_means(b)
    types = ma.index.intersection(mb.index)
    metrics = [m for m in ma.columns if m in mb.columns]
    rows = []
    for t in types:
        for m in metrics:
            va, vb = ma.at[t, m], mb.at[t, m]
            scale = 100.0 if m.endswith("(%)") else 1.0
            if pd.notna(va) and pd.notna(vb) and abs(vb - va) >= PMU_MIN_CHANGE * scale:
                rows.append((t, m, va, vb, vb - va))
    out = pd.DataFrame(rows, columns=PMU_COLUMNS)
    key = out["Diff"].abs() / np.where(out["Metric"].str.endswith("(%)"), 100.0, 1.0)
    return out.iloc[np.argsort(-key.to_numpy(), kind="stable")].reset_index(drop=True)


def compare(a: Profile, b: Profile, top: int = TOP_N, names: tuple[str, str] | None = None) -> Comparison:
    """How Profile ``b`` differs from Profile ``a`` (``Diff`` = B - A); ``names`` label the two
    runs (default: their run names)."""
    ops = _diff(_stats(a, "Op Name"), _stats(b, "Op Name"))
    grew = ops[ops["Time/step Diff(us)"] > 0].sort_values("Time/step Diff(us)", ascending=False, kind="stable")
    shrank = ops[ops["Time/step Diff(us)"] < 0].sort_values("Time/step Diff(us)", kind="stable")
    return Comparison(
        a_name=names[0] if names else a.name, b_name=names[1] if names else b.name,
        step=_step(a, b), op_types=_diff(_stats(a, "OP Type"), _stats(b, "OP Type")), ops=ops,
        regressions=grew.head(top), improvements=shrank.head(top), pmu=_pmu(a, b))
