"""The hybrid-parallel tables of a cluster: its communication groups, its pipeline passes and bubbles, and
the load of its experts.

They read what every rank recorded of the job, as torch_npu's profiler writes it to
``profiler_metadata.json`` (a simulated run's ``info.json`` ``parallel``, a torch_npu run's
``profiler_metadata.json``, a DB's ``META_DATA``): ``distributed_args``, ``parallel_group_info`` (each of the
rank's groups: communicator name, ``group_name`` and global ranks), ``pp_info``, and for a MoE model the tokens
each of the rank's experts got per layer and micro-batch; plus the pipeline passes' mstx ranges
(MindSpeed's ``forward_step`` / ``backward_step``) and the experts' kernels.

Definitions (times in us):

* ``communication_groups``: one row per group of the job, as msprof-analyze's ``communication_group_map``
  recipe reports it (``type`` p2p / collective, ``rank_set`` ``(0,1)``, ``group_name`` the hashed
  communicator name, ``group_id`` the communicator name, ``pg_name``), with the parallelism it serves
  (``Type``: tp, pp, dp, ep or world; MindSpeed's ``exp`` group is ep, its ``dp_modulo_exp`` the experts'
  data-parallel group, dp).
* ``pipeline``: one row per pipeline pass of a rank: its stage, step, micro-batch, model chunk, direction
  (forward / backward), start and end.  A range names its micro-batch and chunk
  (``forward_step micro_batch=3 model_chunk=0``); a bare ``forward_step`` gets the order of the step's
  passes of its direction.
* ``pipeline_bubbles``: per stage, the mean per step over its ranks and steps: the *pipeline time* (the
  step's first pass start on any stage to its last pass end on any stage), the stage's busy time (its
  passes' union), the bubble (pipeline time - busy), its share of the pipeline time (``Bubble Ratio``, what
  Megatron's ``(p - 1) / (v m + p - 1)`` predicts for uniform stages: ``Ideal Bubble Ratio``) and of the
  step (``Step Share``: of the step's time on its longest rank, the step every rank waits for).
* ``expert_load``: per layer and expert: the tokens it computed per step (the recorded tokens per
  micro-batch times the micro-batches, summed over the ranks holding that expert) and the time of its
  expert kernels per step (GroupedMatmul, SwiGlu and their gradients under ``layers.<n>/.../experts/``;
  a rank holding several experts of a layer runs them in one kernel, whose time is shared by their tokens).
* ``expert_imbalance``: per layer: tokens max / mean over experts (``Imbalance``, 1 when balanced) and the
  time at stake: the ranks of an expert-parallel group meet at the AlltoAll after the experts, so the layer's
  expert phase lasts as long as its busiest rank's; ``Time at Stake(us)`` is, per step, the busiest rank's
  expert time minus the mean rank's (what a balanced routing would save), the largest over the layer's
  groups.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from ..sources.db_schema import group_hash
from ..tables.intervals import union

if TYPE_CHECKING:
    from ..profile import Profile

COMMUNICATION_GROUPS = ["Type", "PG Name", "Communication Type", "Rank Set", "Size", "Group Name", "Group ID"]
PIPELINE = ["Stage", "Rank", "Step", "Micro Batch", "Model Chunk", "Direction", "Start(us)", "End(us)",
            "Duration(us)"]
PIPELINE_BUBBLES = ["Stage", "Ranks", "Steps", "Passes", "Pipeline Time(us)", "Busy(us)", "Bubble(us)",
                    "Bubble Ratio", "Ideal Bubble Ratio", "Step Time(us)", "Step Share"]
EXPERT_LOAD = ["Layer", "Expert", "Stage", "Ranks", "Tokens", "Time(us)", "Token Share"]
EXPERT_IMBALANCE = ["Layer", "Stage", "Experts", "Max Tokens", "Mean Tokens", "Imbalance", "Busiest Rank",
                    "Max Time(us)", "Mean Time(us)", "Time at Stake(us)"]

#: MindSpeed's ``pg_name`` of a group -> the parallelism it serves.
GROUP_TYPES = {"hccl_world_group": "world", "tp": "tp", "pp": "pp", "dp": "dp", "exp": "ep", "dp_modulo_exp": "dp",
               "cp": "cp", "dp_cp": "dp", "tp_exp": "ep", "mp": "tp", "embd": "pp"}
_TYPE_ORDER = ["world", "tp", "pp", "dp", "ep", "cp"]
#: The groups whose collectives are point-to-point (msprof-analyze tells them by their ops' names).
_P2P = {"pp", "embd"}
_PASS = re.compile(r"^(forward|backward)_step\b(.*)$")
_FIELD = re.compile(r"(micro_batch|model_chunk)=(\d+)")
_EXPERT_OP = re.compile(r"(?:^|/)layers\.(\d+)/[^/]+/experts/")
EXPERT_OP_TYPES = ("GroupedMatmul", "SwiGlu", "SwiGluGrad")


def parallel_facts(profile: Profile) -> dict:
    """What the rank recorded of the job (``profiler_metadata.json``'s content): a simulated run's
    ``info.json`` ``parallel``, else the torch_npu / DB run's profiler metadata; {} if it recorded none."""
    info = profile.info
    facts = info.get("parallel") or info.get("profiler_metadata") or {}
    return facts if isinstance(facts, dict) else {}


def _ints(values: object) -> list[int]:
    return [int(v) for v in values] if isinstance(values, (list, tuple)) else []


def rank_stage(rank: int, facts: dict) -> int:
    """The pipeline stage of ``rank``: its place in its ``pp`` group (the group's global ranks run the
    stages in order), else Megatron's numbering from ``distributed_args``, else 0 (no pipeline)."""
    coords = facts.get("coords") or {}
    if isinstance(coords.get("pp"), int):
        return int(coords["pp"])
    for group in (facts.get("parallel_group_info") or {}).values():
        if isinstance(group, dict) and group.get("group_name") == "pp" and rank in _ints(group.get("global_ranks")):
            return _ints(group["global_ranks"]).index(rank)
    args = facts.get("distributed_args") or {}
    world, pp = args.get("world_size"), args.get("pipeline_model_parallel_size")
    if isinstance(world, int) and isinstance(pp, int) and pp > 1 and world % pp == 0:
        return rank // (world // pp)
    return 0


# ------------------------------------------------------------------------ groups
def group_rows(facts: dict) -> list[dict]:
    """One rank's groups (its ``parallel_group_info``) as :func:`communication_groups` rows, in the order it
    recorded them: small, so a Dask worker sends them back instead of the rank's facts."""
    rows = []
    for group_id, group in (facts.get("parallel_group_info") or {}).items():
        if not isinstance(group, dict):
            continue
        ranks = sorted(_ints(group.get("global_ranks")))
        pg = str(group.get("group_name", ""))
        rows.append({"Type": GROUP_TYPES.get(pg, pg), "PG Name": pg,
                     "Communication Type": "p2p" if pg in _P2P else "collective",
                     "Rank Set": "(" + ",".join(map(str, ranks)) + ")", "Size": len(ranks),
                     "Group Name": group_hash(str(group_id)), "Group ID": str(group_id), "_first": ranks[:1]})
    return rows


def communication_groups(rows: Iterable[dict]) -> pd.DataFrame:
    """Every group of the ranks' :func:`group_rows` (rank by rank), once (a group is its communicator name),
    world first, then tp, pp, dp, ep, each by its first rank."""
    unique: dict[str, dict] = {}
    for row in rows:
        unique.setdefault(row["Group ID"], row)
    out = pd.DataFrame(list(unique.values()), columns=[*COMMUNICATION_GROUPS, "_first"])
    if out.empty:
        return out.drop(columns="_first").astype({"Size": np.int64})
    order = {t: i for i, t in enumerate(_TYPE_ORDER)}
    out["_order"] = out["Type"].map(lambda t: order.get(t, len(order)))
    out["_first"] = out["_first"].map(lambda r: r[0] if r else -1)
    out = out.sort_values(["_order", "PG Name", "_first"], kind="stable")
    return out[COMMUNICATION_GROUPS].reset_index(drop=True).astype({"Size": np.int64})


# ------------------------------------------------------------------------ pipeline
def rank_passes(rank: int, profile: Profile, stage: int) -> pd.DataFrame:
    """One rank's pipeline passes (:data:`PIPELINE` rows) from its mstx ranges, each in the step whose
    bounds hold its start."""
    tx = profile.msprof_tx
    if tx.empty or "message" not in tx.columns:
        return pd.DataFrame(columns=PIPELINE)
    # a rank has tens of ranges: matched one by one (pandas' str methods cost more per call than these)
    matches = [_PASS.match(str(m)) for m in tx["message"].tolist()]
    sel = np.array([m is not None for m in matches], bool)
    if not sel.any():
        return pd.DataFrame(columns=PIPELINE)
    start = tx["Start_time(us)"].to_numpy(float)[sel]
    end = tx["End_time(us)"].to_numpy(float)[sel]
    direction = np.array([m.group(1) for m in matches if m is not None], object)
    rest = [m.group(2) for m in matches if m is not None]
    bounds = profile.source.step_bounds()
    begins = bounds["begin"].to_numpy(float) / 1000 if len(bounds) else np.zeros(0)
    index = np.searchsorted(begins, start, "right") - 1
    steps = np.where(index >= 0, bounds["step"].to_numpy(np.int64)[np.maximum(index, 0)], 0) if len(bounds) \
        else np.zeros(len(start), np.int64)
    fields = [dict(_FIELD.findall(str(r))) for r in rest]
    out = pd.DataFrame({"Stage": np.int64(stage), "Rank": np.int64(rank), "Step": steps.astype(np.int64),
                        "Micro Batch": [int(f.get("micro_batch", -1)) for f in fields],
                        "Model Chunk": [int(f.get("model_chunk", 0)) for f in fields],
                        "Direction": direction.astype(str), "Start(us)": start, "End(us)": end,
                        "Duration(us)": end - start})
    unnamed = out["Micro Batch"] < 0  # a bare range: the order of its direction's passes in the step
    if unnamed.any():
        order = out.groupby(["Step", "Direction", "Model Chunk"]).cumcount()
        out.loc[unnamed, "Micro Batch"] = order[unnamed]
    return out.astype({"Micro Batch": np.int64, "Model Chunk": np.int64})


def pipeline(passes: Iterable[pd.DataFrame]) -> pd.DataFrame:
    """The ranks' :func:`rank_passes` as one table, by stage, rank and start."""
    parts = [p for p in passes if len(p)]
    if not parts:
        return pd.DataFrame(columns=PIPELINE)
    out = pd.concat(parts, ignore_index=True)
    return out.sort_values(["Stage", "Rank", "Start(us)"], kind="stable").reset_index(drop=True)[PIPELINE]


def ideal_bubble_ratio(facts: dict) -> float:
    """Megatron's bubble share of uniform stages: ``(p - 1) / (v m + p - 1)`` (NaN without a pipeline)."""
    args = facts.get("distributed_args") or {}
    info = facts.get("pp_info") or {}
    p = args.get("pipeline_model_parallel_size")
    m = info.get("microbatch_num", args.get("num_micro_batches"))
    v = info.get("virtual_stages", args.get("virtual_pipeline_model_parallel_size")) or 1
    if not all(isinstance(x, int) for x in (p, m, v)) or p < 2 or m < 1:
        return float("nan")
    return (p - 1) / (v * m + p - 1)


def pipeline_bubbles(passes: pd.DataFrame, step_times: dict[int, float], ideal: float) -> pd.DataFrame:
    """Per stage: the mean pipeline time, busy time and bubble per step (``step_times``: step -> the step's
    time in us, the longest rank's: the Step Share's denominator)."""
    if passes.empty:
        return pd.DataFrame(columns=PIPELINE_BUBBLES)
    window = passes.groupby("Step").agg(lo=("Start(us)", "min"), hi=("End(us)", "max"))
    span = (window["hi"] - window["lo"]).to_dict()
    rows = []
    for (stage, rank, step), g in passes.groupby(["Stage", "Rank", "Step"], sort=True):
        s, e = union(g["Start(us)"].to_numpy(float), g["End(us)"].to_numpy(float))
        busy = float((e - s).sum())
        step_time = step_times.get(int(step), float("nan"))
        rows.append((int(stage), int(rank), int(step), len(g), span[step], busy, step_time))
    per = pd.DataFrame(rows, columns=["Stage", "Rank", "Step", "Passes", "Pipeline", "Busy", "StepTime"])
    per["Bubble"] = per["Pipeline"] - per["Busy"]
    out = per.groupby("Stage", sort=True).agg(
        Ranks=("Rank", "nunique"), Steps=("Step", "nunique"), Passes=("Passes", "mean"),
        Pipeline=("Pipeline", "mean"), Busy=("Busy", "mean"), Bubble=("Bubble", "mean"),
        StepTime=("StepTime", "mean")).reset_index()
    return pd.DataFrame({
        "Stage": out["Stage"].astype(np.int64), "Ranks": out["Ranks"].astype(np.int64),
        "Steps": out["Steps"].astype(np.int64), "Passes": out["Passes"].astype(float),
        "Pipeline Time(us)": out["Pipeline"], "Busy(us)": out["Busy"], "Bubble(us)": out["Bubble"],
        "Bubble Ratio": out["Bubble"] / out["Pipeline"], "Ideal Bubble Ratio": ideal,
        "Step Time(us)": out["StepTime"], "Step Share": out["Bubble"] / out["StepTime"]})[PIPELINE_BUBBLES]


# ------------------------------------------------------------------------ experts
def rank_expert_time(profile: Profile) -> dict[str, float]:
    """Per layer (its number as text), the rank's expert kernels' time per step (us)."""
    ops = profile.op_summary
    if ops.empty or "Op Name" not in ops.columns:
        return {}
    sel = ops["OP Type"].astype(str).isin(EXPERT_OP_TYPES).to_numpy()
    names = ops["Op Name"].astype(str)[sel]
    layers = names.str.extract(_EXPERT_OP)[0]
    times = ops["Task Duration(us)"].to_numpy(float)[sel]
    keep = layers.notna().to_numpy()
    steps = max(int(profile.iteration_count), 1)
    totals = pd.Series(times[keep]).groupby(layers[keep].to_numpy()).sum() / steps
    return {str(k): float(v) for k, v in totals.items()}


def _rank_expert_rows(rank: int, profile: Profile) -> list[dict]:
    facts = parallel_facts(profile)
    moe = facts.get("moe") or {}
    experts = _ints(moe.get("experts"))
    per_layer = moe.get("tokens_per_micro_batch") or {}
    if not experts or not isinstance(per_layer, dict):
        return []
    micro = (facts.get("pp_info") or {}).get("microbatch_num") or 1
    stage = rank_stage(rank, facts)
    times = rank_expert_time(profile)
    groups = [tuple(sorted(_ints(g.get("global_ranks")))) for g in (facts.get("parallel_group_info") or {}).values()
              if isinstance(g, dict) and g.get("group_name") == "exp"]
    group = groups[0] if groups else (rank,)
    rows = []
    for layer, tokens in per_layer.items():
        tokens = _ints(tokens)
        total = sum(tokens)
        for expert, n in zip(experts, tokens):
            share = n / total if total else 1 / len(tokens)
            rows.append({"Layer": int(layer), "Expert": expert, "Stage": stage, "Rank": rank, "Group": group,
                         "Tokens": int(n) * int(micro), "Time": times.get(str(layer), 0.0) * share,
                         "Rank Time": times.get(str(layer), 0.0)})
    return rows


def _expert_rows(ranks: dict[int, Profile]) -> pd.DataFrame:
    rows = [row for r, p in ranks.items() for row in _rank_expert_rows(r, p)]
    return pd.DataFrame(rows, columns=["Layer", "Expert", "Stage", "Rank", "Group", "Tokens", "Time", "Rank Time"])


def expert_load(ranks: dict[int, Profile]) -> pd.DataFrame:
    """Per layer and expert: tokens and time per step, summed over the ranks holding the expert."""
    rows = _expert_rows(ranks)
    if rows.empty:
        return pd.DataFrame(columns=EXPERT_LOAD)
    out = rows.groupby(["Layer", "Expert"], sort=True).agg(
        Stage=("Stage", "first"), Ranks=("Rank", lambda r: ",".join(map(str, sorted(r)))),
        Tokens=("Tokens", "sum"), Time=("Time", "sum")).reset_index()
    out["Token Share"] = out["Tokens"] / out.groupby("Layer")["Tokens"].transform("sum")
    return out.rename(columns={"Time": "Time(us)"}).astype(
        {"Layer": np.int64, "Expert": np.int64, "Stage": np.int64, "Tokens": np.int64})[EXPERT_LOAD]


def expert_imbalance(ranks: dict[int, Profile]) -> pd.DataFrame:
    """Per layer: the tokens' max / mean over experts, and the expert time a balanced routing would save
    per step (the busiest rank's minus the mean rank's, in the layer's worst expert-parallel group)."""
    rows = _expert_rows(ranks)
    if rows.empty:
        return pd.DataFrame(columns=EXPERT_IMBALANCE)
    load = rows.groupby(["Layer", "Expert"])["Tokens"].sum()
    out = []
    for layer, g in rows.groupby("Layer", sort=True):
        tokens = load.loc[layer]
        per_rank = g.groupby(["Group", "Rank"])["Rank Time"].first()
        stake, busiest, worst_max, worst_mean = -1.0, -1, 0.0, 0.0
        for _, times in per_rank.groupby(level="Group"):
            gap = float(times.max() - times.mean())
            if gap > stake:
                stake, busiest = gap, int(times.idxmax()[1])
                worst_max, worst_mean = float(times.max()), float(times.mean())
        mean = float(tokens.mean())
        out.append({"Layer": int(layer), "Stage": int(g["Stage"].iloc[0]), "Experts": len(tokens),
                    "Max Tokens": int(tokens.max()), "Mean Tokens": mean,
                    "Imbalance": float(tokens.max()) / mean if mean else float("nan"), "Busiest Rank": busiest,
                    "Max Time(us)": worst_max, "Mean Time(us)": worst_mean, "Time at Stake(us)": max(stake, 0.0)})
    return pd.DataFrame(out, columns=EXPERT_IMBALANCE)
