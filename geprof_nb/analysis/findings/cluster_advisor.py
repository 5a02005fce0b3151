"""Findings for a whole cluster: slow ranks, slow links, time lost waiting, stragglers; and of a
hybrid-parallel job, its pipeline bubbles, unbalanced stages and expert imbalance.

The rules read only the cross-rank tables of :mod:`..cluster.cross_rank` (through a
:class:`~..cluster.profile.ClusterProfile`), so they work with either engine and on imported
clusters.  The output has :mod:`.advisor`'s columns and ranking: the time at stake is per
step, and its share of the median rank's step sets the priority (High >= 20%, Medium >= 5%).
With synchronised collectives a cluster runs at the pace of its slowest member, so what one
slow rank or link costs is lost on every rank: the time at stake is that loss.

Per step means over the typical steps, as :mod:`.advisor` counts them: a step that is an outlier on
any rank (a one-off stall, which every rank waits for) is left out of the slow-rank, wait and
straggler figures and is its own finding (:func:`one_off_stalls`), naming the rank that stalled.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Callable

import numpy as np
import pandas as pd

from ..tables.step_split import OutlierStep
from .advisor import (
    TP_EXPOSED_MIN_SHARE,
    Finding,
    GroupExposure,
    exposed_tp_finding,
    findings_table,
    tensor_parallel_exposure,
    us_text,
)

if TYPE_CHECKING:
    from ..cluster.profile import ClusterProfile, ClusterTables

#: Findings of one kind listed one by one; beyond this many, one finding names the worst.
MAX_EACH = 3
#: Wait beyond the least-waiting rank's, as a share of the step, that makes the wait finding:
#: the least-waiting rank shows what the ring's own handshakes cost, the rest is imbalance.
WAIT_EXCESS_MIN_SHARE = 0.05
#: A rank is a straggler when it arrives last at this share of the collectives whose arrivals
#: differ at all (with one slow rank it is last every time; random jitter spreads the votes).
STRAGGLER_MIN_SHARE = 0.5
#: ... and is on average this late (us) behind the median rank: below it arrivals are noise.
STRAGGLER_MIN_LATE_US = 5.0


def _rank_list(ranks: list[int], n: int = 8) -> str:
    shown = ", ".join(str(r) for r in ranks[:n])
    return shown + (f" and {len(ranks) - n} more" if len(ranks) > n else "")


def _step_us(t: ClusterTables) -> float:
    """The median rank's mean step time: what the shares are shares of."""
    sr = t.slow_ranks
    return float(np.median(sr["Step Time(us)"])) if len(sr) else 0.0


def _steps(t: ClusterTables) -> int:
    """The steps collected (the most of any rank): what sums over the whole collection are divided by."""
    rows = t.cluster_step_trace_time
    return max(1, int(rows.groupby("Index").size().max())) if len(rows) else 1


def _typical_steps(t: ClusterTables) -> int:
    """The steps collected less the outlier steps: what sums over the typical steps' collectives are divided by."""
    rows = t.cluster_step_trace_time
    rows = rows[~rows["Step"].isin(t.outlier_steps)]
    return max(1, int(rows.groupby("Index").size().max())) if len(rows) else 1


def _late_per_step(t: ClusterTables, rank: int) -> float:
    """What the ranks wait for ``rank`` per step: its lateness (vs the median rank) where it arrived last."""
    st = t.typical_stragglers
    mine = st[(st["Last Rank"] == rank) & (st["Spread(us)"] > 0)] if len(st) else st
    return float(mine["Late By(us)"].sum()) / _typical_steps(t) if len(mine) else 0.0


def _slow_rank_cost(t: ClusterTables, rank: int, deviation: float) -> float:
    """A slow rank costs the cluster what the others wait for it; much of its extra time can hide
    behind collectives it is part of, so that is less than its deviation, never more.  Without
    collectives (nothing to wait at) its deviation is the cost."""
    late = _late_per_step(t, rank)
    return max(0.0, min(deviation, late) if late > 0 else deviation)


def slow_ranks(t: ClusterTables) -> list[Finding]:
    """Ranks whose own time (Computing + Free) is above the median rank's by the slow-rank threshold."""
    sr = t.slow_ranks
    slow = sr[sr["Slow"]]
    if slow.empty:
        return []
    out = []
    med_comp = float(np.median(sr["Computing(us)"]))
    med_free = float(np.median(sr["Free(us)"]))
    normal = int(sr["Rank"].iloc[-1])  # the rank with the least own time
    for _, row in slow.head(MAX_EACH).iterrows():
        rank, part = int(row["Rank"]), row["Bound"]
        others = sr[sr["Rank"] != rank]
        wait_others = float(others["Wait Time(us)"].median()) if len(others) else 0.0
        evidence = (f"per step: Computing {us_text(row['Computing(us)'])} (median rank {us_text(med_comp)}, "
                    f"x{row['Computing Ratio']:.2f}), Free {us_text(row['Free(us)'])} (median {us_text(med_free)}); "
                    f"own time {us_text(row['Own Time(us)'])} vs median {us_text(row['Median Own Time(us)'])}, z-score "
                    f"{row['Z-Score']:.1f}; it arrived last at {int(row['Last Arrivals'])} collectives; collective "
                    f"wait {us_text(row['Wait Time(us)'])} on this rank, {us_text(wait_others)} on the median other "
                    "rank")
        if part == "Free":
            suggestion = (f"Rank {rank}'s device idles between tasks longer than the others': look at its host "
                          f"(cluster.rank({rank}).host_events and api_statistic: launch jitter, CPU contention, "
                          "a data loader that stalls on this rank, its input pipeline's storage).")
        else:
            suggestion = (f"Rank {rank}'s kernels run slower than the same kernels elsewhere: compare it with a "
                          f"normal rank (geprof_nb.compare(cluster.rank({normal}), cluster.rank({rank}))); check "
                          "the card (npu-smi: frequency, temperature, ECC / HBM errors) and replace or drain it; "
                          "every other rank waits for it at each collective.")
        out.append(Finding(
            "Slow rank",
            f"Rank {rank} is slow: its own time per step (Computing + Free) is {row['Own Time Ratio'] - 1:.0%} "
            f"above the median rank's ({part} explains it); the others wait for it at collectives",
            evidence, suggestion, _slow_rank_cost(t, rank, float(row["Deviation(us)"]))))
    if len(slow) > MAX_EACH:
        rest = slow.iloc[MAX_EACH:]
        out.append(Finding(
            "Slow rank", f"{len(rest)} more ranks are slow (own time above the median by more than "
            f"{t.slow_rank_threshold:.0%})", f"ranks {_rank_list(rest['Rank'].tolist())}; see cluster.slow_ranks",
            "Look for what they share (a server, a switch, a host setting).", float(rest["Deviation(us)"].max())))
    return out


def slow_links(t: ClusterTables) -> list[Finding]:
    """Links whose bandwidth is well below the median of their link type."""
    links = t.slow_links
    if links.empty:
        return []
    steps = _steps(t)
    out = []
    for row in links.head(MAX_EACH).itertuples(index=False):
        src, dst, link, transport, tasks, size, time_us, bw, median, ratio, lost = row
        out.append(Finding(
            "Slow link",
            f"Link {src} -> {dst} ({link}) runs at {bw:.1f} GB/s, {ratio:.0%} of the {link} median {median:.1f} GB/s",
            f"{tasks} {transport} transfers, {size / 1e6:,.1f} MB in {us_text(time_us)} over the collection; at the "
            f"median bandwidth they would take {us_text(time_us - lost)}",
            f"Check the {link} link from rank {src} to rank {dst} (port and cable, link retraining and error counters, "
            "e.g. hccn_tool / npu-smi on both servers). A ring collective moves at its slowest link's pace, so every "
            "rank waits for this one.", max(0.0, float(lost)) / steps))
    if len(links) > MAX_EACH:
        rest = links.iloc[MAX_EACH:]
        pairs = [f"{s}->{d}" for s, d in zip(rest["Src Rank"], rest["Dst Rank"])]
        out.append(Finding("Slow link", f"{len(rest)} more links are slow",
                           f"links {_rank_list(pairs)}; see cluster.slow_links",
                           "Look for what they share (a server's NIC, a switch).",
                           float(rest["Time Lost(us)"].max()) / steps))
    return out


def high_wait(t: ClusterTables) -> list[Finding]:
    """Time ranks spend waiting inside collectives beyond what the least-waiting rank spends, less what
    the slow-rank, slow-link and straggler findings already count: that wait is the loss they put at
    stake (the others wait for the slow rank, for the slow link's ring step), so counting it here again
    would claim it twice.  What none of them explains is the finding, when it is worth one."""
    sr = t.slow_ranks
    if sr.empty or not sr["Wait Time(us)"].gt(0).any():
        return []
    step_us = _step_us(t)
    wait = sr["Wait Time(us)"].to_numpy(np.float64)
    floor = float(wait.min())
    median = float(np.median(wait))
    excess = median - floor
    explained = sum(f.at_stake_us for rule in (slow_ranks, slow_links, stragglers) for f in rule(t))
    unexplained = excess - explained
    if step_us <= 0 or unexplained / step_us < WAIT_EXCESS_MIN_SHARE:
        return []
    least = int(sr["Rank"].iloc[int(np.argmin(wait))])
    most = int(sr["Rank"].iloc[int(np.argmax(wait))])
    beyond = (f" ({us_text(explained)} of it the other findings count: {us_text(unexplained)} unexplained)"
              if explained else "")
    ct = t.communication_time
    ratio = float(ct["Wait Time Ratio"].median()) if len(ct) and ct["Wait Time Ratio"].notna().any() else float("nan")
    return [Finding(
        "High wait",
        f"Ranks wait {us_text(median)} per step inside collectives (median rank, {median / step_us:.0%} of the "
        f"step), {us_text(excess)} more than rank {least}, which waits least{beyond}",
        f"Notify_Wait per step: rank {least} {us_text(floor)}, median {us_text(median)}, rank {most} "
        f"{us_text(float(wait.max()))}; median wait ratio (wait / (wait + transit)) of a collective {ratio:.2f}",
        "Waiting is imbalance: ranks reach a collective at different times (a slow or jittery rank) or a ring step "
        "waits for a slow link. If arrivals vary at random, look at host launch jitter and data loading "
        "(cluster.stragglers shows who is late where).", unexplained)]


#: Point-to-point transfers (a pipeline stage's send to the next, its receive from the previous): the receiver
#: waits for its sender by the schedule, so the last to arrive there is the later stage, not a late rank.
POINT_TO_POINT = re.compile(r"send|receive|recv", re.IGNORECASE)


def stragglers(t: ClusterTables) -> list[Finding]:
    """Ranks (not already found slow) that arrive last at most collectives whose arrivals differ,
    by more than noise: late launches rather than slow compute.  Point-to-point transfers
    (:data:`POINT_TO_POINT`) cast no vote."""
    st = t.typical_stragglers
    if len(st):
        st = st[~st["OP Type"].astype(str).str.contains(POINT_TO_POINT)]
    spread = st[st["Spread(us)"] > 0] if len(st) else st
    if spread.empty:
        return []
    steps = _typical_steps(t)
    out = []
    per = spread.groupby("Last Rank").agg(n=("Op Name", "count"), late=("Late By(us)", "mean"),
                                          total=("Late By(us)", "sum"), caused=("Wait Caused(us)", "sum"))
    per = per.sort_values("total", ascending=False)
    slow = set(t.slow_ranks[t.slow_ranks["Slow"]]["Rank"].tolist())  # their finding already counts this
    for rank, row in per[~per.index.isin(slow)].head(MAX_EACH).iterrows():
        share = row["n"] / len(spread)
        if share < STRAGGLER_MIN_SHARE or row["late"] < STRAGGLER_MIN_LATE_US:
            continue
        worst = spread[spread["Last Rank"] == rank].sort_values("Late By(us)", ascending=False).iloc[0]
        out.append(Finding(
            "Straggler",
            f"Rank {rank} arrives last at {int(row['n'])} of {len(spread)} collectives whose arrivals differ, "
            f"{us_text(row['late'])} after the median rank on average",
            f"the others wait {us_text(row['caused'] / steps)} per step for it in total (summed over ranks); the "
            f"latest: {worst['Op Name']} (step {int(worst['Iteration ID'])}), {us_text(float(worst['Late By(us)']))} "
            "late",
            f"Find what delays rank {rank} before these collectives: its compute (see a slow-rank finding), its "
            "host launch (host_events, api_statistic of cluster.rank(r)) or its input pipeline.",
            float(row["total"]) / steps))
    return out


def one_off_stalls(t: ClusterTables) -> list[Finding]:
    """Outlier steps whose excess is device idle time on some rank: that rank stalled once, and every
    other rank waited for it inside the step's collectives.  Time at stake: the stall spread over the
    collected steps (what it cost per step, once)."""
    stalls: dict[int, list[tuple[int, OutlierStep]]] = {}
    for rank, split in t.rank_step_splits.items():
        for o in split.outliers:
            if o.whole and o.is_stall:
                stalls.setdefault(o.step, []).append((rank, o))
    steps = _steps(t)
    out = []
    for step in sorted(stalls)[:MAX_EACH]:
        rank, o = max(stalls[step], key=lambda ro: ro[1].extra_free_us)
        typical = t.rank_step_splits[rank]
        out.append(Finding(
            "One-off stall",
            f"A {o.extra_free_us / 1000:,.1f} ms stall on rank {rank} in step {step} "
            f"(between step {step - 1}'s end and its own): every rank waited for it, once "
            f"({us_text(o.extra_free_us / steps)} per step over the {steps} steps)",
            f"rank {rank}'s step {step}: {o.length_us / 1000:,.1f} ms, "
            f"a typical step {typical.length_us / 1000:,.3f} ms; "
            f"its Free {o.extra_free_us / 1000:,.1f} ms above a typical step's; "
            "the other ranks spent the stall waiting in the step's collectives; "
            "the per-step figures leave this step out",
            f"Look at what rank {rank} did once before step {step}: its loop's own work (a checkpoint save, an "
            "evaluation, logging), its data loader or storage, another process on its host.",
            o.extra_free_us / steps))
    return out


# ------------------------------------------------------------------ hybrid parallelism
#: A stage is unbalanced when its busy time (its pipeline passes) exceeds the stages' mean by this share.
STAGE_IMBALANCE_MIN_SHARE = 0.05
#: A MoE layer's routing is imbalanced when its busiest expert gets this many times the mean tokens.
EXPERT_IMBALANCE_MIN = 1.2
#: A pipeline bubble is a finding when it is this share of the step.
BUBBLE_MIN_SHARE = 0.05


def _capped(us: float, step_us: float) -> float:
    """A time at stake per step is never more than the step."""
    return max(0.0, min(us, step_us)) if step_us > 0 else max(0.0, us)


def _expert_stake_by_stage(cluster: ClusterProfile) -> dict[int, float]:
    """Per stage, the expert time per step its layers' imbalance costs (their ``Time at Stake`` summed:
    a stage runs its layers one after the other)."""
    imb = cluster.expert_imbalance
    if imb.empty:
        return {}
    return {int(k): float(v) for k, v in imb.groupby("Stage")["Time at Stake(us)"].sum().items()}


def bubble_bound_stage(cluster: ClusterProfile) -> list[Finding]:
    """The pipeline schedule's own bubble: the idle time of the busiest stage, which every stage has (the
    warm-up and cool-down of the schedule).  Time at stake: that stage's bubble per step, what the step
    would lose with no fill and drain; the other stages' extra idle is the unbalanced-stages finding's."""
    b = cluster.pipeline_bubbles
    if len(b) < 2:
        return []
    step_us = float(b["Step Time(us)"].max())
    critical = b.loc[b["Busy(us)"].idxmax()]
    bubble = float(critical["Bubble(us)"])
    if not step_us > 0 or bubble / step_us < BUBBLE_MIN_SHARE:
        return []
    facts = next((f for f in cluster.parallel_facts.values() if f), {})
    info = facts.get("pp_info") or {}
    m, v, p = info.get("microbatch_num"), info.get("virtual_stages") or 1, len(b)
    ideal = float(critical["Ideal Bubble Ratio"])
    schedule = f"{info.get('pp_type', '1f1b')} with {m} micro-batches" + (f", {v} model chunks" if v > 1 else "")
    better = ""
    if isinstance(m, int) and isinstance(v, int):
        better = (f": twice the micro-batches gives (p-1)/(v*m+p-1) = {(p - 1) / (v * 2 * m + p - 1):.0%}, an "
                  f"interleaved schedule with {2 * v} model chunks {(p - 1) / (2 * v * m + p - 1):.0%}")
    return [Finding(
        "Pipeline bubble",
        f"The pipeline idles {critical['Bubble Ratio']:.0%} of its time even on its busiest stage "
        f"(stage {int(critical['Stage'])}): the {schedule} fills and drains {p} stages",
        f"stage {int(critical['Stage'])}: bubble {us_text(bubble)} per step of a "
        f"{us_text(float(critical['Pipeline Time(us)']))} pipeline ({critical['Step Share']:.0%} of the step); "
        "Megatron's (p-1)/(v*m+p-1) for uniform stages: "
        f"{ideal:.0%} (cluster.pipeline_bubbles)",
        f"Shrink the bubble: more micro-batches per step or an interleaved schedule (virtual stages){better}.",
        _capped(bubble, step_us))]


def unbalanced_stages(cluster: ClusterProfile) -> list[Finding]:
    """A stage busier than the others: every stage waits for it, so the step is paced by it.  Time at stake:
    its busy time per step beyond the stages' mean (what moving layers off it would save), less the expert
    imbalance the expert-imbalance finding already claims on that stage."""
    b = cluster.pipeline_bubbles
    if len(b) < 2:
        return []
    busy = b["Busy(us)"].astype(float)
    critical = b.loc[busy.idxmax()]
    stage = int(critical["Stage"])
    excess = float(busy.max() - busy.mean())
    if excess < STAGE_IMBALANCE_MIN_SHARE * float(busy.mean()):
        return []
    stake = excess - _expert_stake_by_stage(cluster).get(stage, 0.0)
    idle = b[b["Stage"] != stage]
    extra = float((idle["Bubble(us)"] - float(critical["Bubble(us)"])).mean())
    return [Finding(
        "Unbalanced pipeline stages",
        f"Stage {stage} is busy {us_text(float(busy.max()))} per step, {busy.max() / busy.mean() - 1:.0%} above the "
        "stages' mean: the others wait for it",
        f"busy time per stage: {', '.join(f'{int(s)}: {us_text(float(u))}' for s, u in zip(b['Stage'], busy))}; "
        f"the other stages idle {us_text(extra)} per step more than stage {stage} (cluster.pipeline_bubbles)",
        f"Move layers off stage {stage} (an embedding or a head and loss weigh as layers do: Megatron's "
        "decoder_first/last_pipeline_num_layers, MindSpeed's --num-layer-list), or give it fewer.",
        _capped(stake, float(b["Step Time(us)"].max())))]


def expert_imbalance(cluster: ClusterProfile) -> list[Finding]:
    """MoE layers whose router sends the busiest expert far more tokens than the mean: its rank computes
    longest and its expert-parallel group waits for it at the AlltoAll.  Time at stake: per step, the
    busiest rank's expert time beyond the mean rank's, summed over the stage's layers, on the stage where
    that is largest (stages run at once)."""
    imb = cluster.expert_imbalance
    if imb.empty or float(imb["Imbalance"].max()) < EXPERT_IMBALANCE_MIN:
        return []
    by_stage = _expert_stake_by_stage(cluster)
    stage = max(by_stage, key=by_stage.get)
    worst = imb.loc[imb["Imbalance"].idxmax()]
    skewed = imb[imb["Imbalance"] >= EXPERT_IMBALANCE_MIN]
    step_us = float(cluster.pipeline_bubbles["Step Time(us)"].max()) if len(cluster.pipeline_bubbles) else 0.0
    return [Finding(
        "Expert imbalance",
        f"{len(skewed)} of {len(imb)} MoE layers route their tokens unevenly: layer {int(worst['Layer'])}'s busiest "
        f"expert gets {worst['Imbalance']:.2f}x the mean tokens",
        f"layer {int(worst['Layer'])}: {int(worst['Max Tokens']):,} tokens at most, {worst['Mean Tokens']:,.0f} on "
        f"average per expert and step; its busiest rank ({int(worst['Busiest Rank'])}) computes "
        f"{us_text(float(worst['Max Time(us)']))} of experts, the mean rank {us_text(float(worst['Mean Time(us)']))}; "
        f"stage {stage} loses {us_text(by_stage[stage])} per step (cluster.expert_load, cluster.expert_imbalance)",
        "Balance the routing: an auxiliary load-balancing loss (Megatron's --moe-aux-loss-coeff), a token capacity "
        "(--moe-expert-capacity-factor) or aux-loss-free bias balancing.",
        _capped(by_stage[stage], step_us))]


#: The hybrid-parallel rules read the ClusterProfile's parallel tables (not the cross-rank ones).
PARALLEL_RULES: tuple[Callable[["ClusterProfile"], list[Finding]], ...] = (
    bubble_bound_stage, unbalanced_stages, expert_imbalance)


Rule = Callable[["ClusterTables"], list[Finding]]
RULES: tuple[Rule, ...] = (slow_ranks, slow_links, high_wait, stragglers, one_off_stalls)
#: The rules whose figures are per-step means over the typical steps (slow links are the whole collection's).
TYPICAL_STEP_RULES = (slow_ranks, high_wait, stragglers)


def advise(cluster: ClusterProfile) -> pd.DataFrame:
    """Findings ranked High, Medium, Low, then by time at stake per step (:data:`.advisor.COLUMNS`)."""
    t = cluster.tables()
    step_us = _step_us(t)
    parallel = [f for rule in PARALLEL_RULES for f in rule(cluster)]
    findings = []
    for rule in RULES:
        found = rule(t)
        if rule is high_wait and parallel:
            found = _wait_beyond(found, parallel, step_us)
        if rule in TYPICAL_STEP_RULES:
            for f in found:
                f.evidence += f"; {_per_step_basis(t)}"
        findings.extend(found)
    findings.extend(exposed_tensor_parallel(cluster, step_us))
    return findings_table(findings + parallel, step_us)


def _wait_beyond(waits: list[Finding], parallel: list[Finding], step_us: float) -> list[Finding]:
    """The high-wait finding less what the pipeline and expert findings claim: a stage waits for a busier one at
    its receives, an expert-parallel group for its busiest rank at the AlltoAll, so that wait is their loss."""
    claimed = sum(f.at_stake_us for f in parallel)
    out = []
    for f in waits:
        left = f.at_stake_us - claimed
        if step_us > 0 and left / step_us >= WAIT_EXCESS_MIN_SHARE:
            f.at_stake_us = left
            f.evidence += f"; {us_text(claimed)} of it the pipeline and expert findings count"
            out.append(f)
    return out


def exposed_tensor_parallel(cluster: ClusterProfile, step_us: float) -> list[Finding]:
    """The rank whose tensor-parallel collectives computation hides least (:func:`.advisor.tensor_parallel_exposure`),
    if that is :data:`.advisor.TP_EXPOSED_MIN_SHARE` of the step or more.  One rank per pipeline stage is
    measured (the one with tp and dp coordinate 0 in info.json's ``parallel.coords``: data-parallel replicas
    run the same collectives, a tp group's members end them together), every rank where the runs do not say.
    Time at stake: that rank's exposed time per step, never more than the median rank's step."""
    worst: tuple[int, GroupExposure] | None = None
    for r, p in cluster.ranks.items():
        parallel = p.info.get("parallel") or {}
        coords = parallel.get("coords") or {}
        tp = (parallel.get("distributed_args") or {}).get("tensor_model_parallel_size", 1)
        if not isinstance(tp, int) or tp < 2:  # no tensor parallelism (or a size the run does not say)
            continue
        if coords and (coords.get("tp", 0) or coords.get("dp", 0)):
            continue
        exposure = tensor_parallel_exposure(p)
        if exposure is not None and (worst is None or exposure.exposed_us > worst[1].exposed_us):
            worst = (r, exposure)
    if worst is None or step_us <= 0 or worst[1].exposed_us / step_us < TP_EXPOSED_MIN_SHARE:
        return []
    rank, exposure = worst
    stage = (cluster.ranks[rank].info.get("parallel") or {}).get("coords", {}).get("pp")
    where = f"rank {rank}" + (f" (pipeline stage {stage}, the stage that hides least)" if stage is not None else "")
    return [exposed_tp_finding(exposure, step_us, where)]


def _per_step_basis(t: ClusterTables) -> str:
    """What the per-step figures of the typical-step rules average, for their evidence."""
    n = _typical_steps(t)
    text = f"per step: mean of {n} step{'s' * (n != 1)}"
    if t.outlier_steps:
        steps = ", ".join(str(s) for s in t.outlier_steps)
        text += f", outlier step{'s' * (len(t.outlier_steps) != 1)} {steps} left out"
    return text
