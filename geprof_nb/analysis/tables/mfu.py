"""Model FLOPs utilisation (MFU) of an LLM training step: the FLOPs the model needs against what the devices
could do in the step's time.

The model FLOPs of a step are PaLM's (Chowdhery et al. 2022, Appendix B, "Model FLOPs utilization"; the same
count as nanoGPT's ``estimate_mfu``): per token ``6 N + 12 L h s`` in training (forward 2, backward 4 FLOPs per
parameter; the attention scores and their product with the values, ``2 x 2 L h s`` forward), ``2 N + 4 L h s``
for a forward-only step, with ``N`` the parameters a token goes through (all of a dense model's, the active
ones of a MoE: the counts the run recorded, embeddings included), ``L`` the layers, ``h`` the hidden size and
``s`` the sequence length.  The attention term is not halved for a causal mask: the FLOPs a causal
FlashAttention skips count as done, as PaLM and Megatron-LM count them, so MFU compares runs whatever their
kernels skip.  A step has ``micro_batch_size x seq_len x micro_batches x dp`` tokens (the job's global batch).

MFU = model FLOPs / (step time x devices x the device's peak), the peak being the AI Core cube's dense fp16 /
bf16 rate: ``cube_flops_per_cycle x ai_core_num x aic_frequency`` (a Da Vinci cube does 16 x 16 x 16 MACs, 8192
FLOPs, a cycle: 353.9 TFLOP/s for the 24 cores at 1.8 GHz of an Atlas A2 910B2).  Recomputation and the
optimizer are not model FLOPs, so they lower MFU, as they should.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .breakdown import whole_periods
from .step_split import PARTS

COLUMNS = ["Step", "Step Time(us)", "Whole Period", "Tokens", "Model FLOPs", "Devices",
           "Achieved TFLOPS per Device", "Peak TFLOPS per Device", "MFU(%)"]
#: A Da Vinci AI Core's cube: 16 x 16 x 16 fp16 / bf16 MACs a cycle, 2 FLOPs each (for device facts that do
#: not give ``cube_flops_per_cycle``, as real msprof and torch_npu output do not).
DA_VINCI_CUBE_FLOPS_PER_CYCLE = 16 * 16 * 16 * 2
#: The model facts MFU needs, as info.json's ``parallel.model`` names them.
MODEL_FIELDS = ("layers", "hidden", "seq_len", "micro_batch_size", "active_parameters")


@dataclass(frozen=True)
class ModelFacts:
    """What a step's model FLOPs follow from."""

    #: the parameters a token goes through (a MoE's active ones)
    parameters: int
    layers: int
    hidden: int
    seq_len: int
    micro_batch_size: int
    micro_batches: int = 1
    dp: int = 1
    #: the devices the job runs on (tp x pp x dp)
    world_size: int = 1
    training: bool = True

    @property
    def tokens(self) -> int:
        """Tokens of one step of the whole job."""
        return self.micro_batch_size * self.seq_len * self.micro_batches * self.dp

    @property
    def flops_per_token(self) -> float:
        """``6 N + 12 L h s`` (training) or ``2 N + 4 L h s`` (forward only)."""
        dense, attention = (6, 12) if self.training else (2, 4)
        return float(dense * self.parameters + attention * self.layers * self.hidden * self.seq_len)

    @property
    def step_flops(self) -> float:
        return self.tokens * self.flops_per_token


def model_facts(info: Mapping, model: Mapping | None = None) -> ModelFacts:
    """The facts of a run's ``info.json`` (``parallel.model`` and ``parallel.distributed_args``), any of them
    replaced by ``model`` (for real runs, whose files do not record the model: ``active_parameters``,
    ``layers``, ``hidden``, ``seq_len``, ``micro_batch_size``, and ``micro_batches``, ``dp``, ``world_size``,
    ``training`` if not 1, 1, 1, True).  A missing or non-positive fact is a ValueError naming it."""
    parallel = info.get("parallel") if isinstance(info.get("parallel"), Mapping) else {}
    recorded = dict(parallel.get("model") or {})
    args = parallel.get("distributed_args") or {}
    recorded.setdefault("micro_batches", args.get("num_micro_batches", 1))
    recorded.setdefault("dp", args.get("data_parallel_size", 1))
    recorded.setdefault("world_size", args.get("world_size", 1))
    recorded.update(model or {})
    missing = [f for f in MODEL_FIELDS if f not in recorded]
    if missing:
        raise ValueError(f"MFU needs the model's {', '.join(missing)}: the run's info.json has no parallel.model "
                         f"with them (a simulated ge.models.llm run records them); pass model={{...}} with "
                         f"{', '.join(MODEL_FIELDS)} (and micro_batches, dp, world_size if not 1)")
    values = {}
    for field in (*MODEL_FIELDS, "micro_batches", "dp", "world_size"):
        v = recorded[field]
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
            raise ValueError(f"model fact {field} {v!r} is not valid; accepted: a positive integer")
        values[field] = int(v)
    training = recorded.get("training", True)
    if not isinstance(training, bool):
        raise ValueError(f"model fact training {training!r} is not valid; accepted: true or false")
    return ModelFacts(values["active_parameters"], values["layers"], values["hidden"], values["seq_len"],
                      values["micro_batch_size"], values["micro_batches"], values["dp"], values["world_size"],
                      training)


def peak_flops(device: Mapping, given: float | None = None) -> float:
    """``given`` (FLOP/s, a positive number) if not None, else the device's :func:`cube_peak_flops`."""
    if given is None:
        return cube_peak_flops(device)
    if isinstance(given, bool) or not isinstance(given, (int, float, np.integer, np.floating)) or not given > 0:
        raise ValueError(f"peak_flops {given!r} is not valid; accepted: a positive number of FLOP/s")
    return float(given)


def cube_peak_flops(device: Mapping) -> float:
    """The device's dense fp16 / bf16 cube peak (FLOP/s): ``cube_flops_per_cycle`` (else the Da Vinci cube's
    8192) x ``ai_core_num`` x ``aic_frequency`` (MHz); a ValueError naming the fact the run lacks."""
    cores, mhz = device.get("ai_core_num"), device.get("aic_frequency") or device.get("aic_frequency_mhz")
    for name, v in (("ai_core_num", cores), ("aic_frequency", mhz)):
        if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)) or not v > 0:
            raise ValueError(f"the device's peak needs its {name}, which the run's device facts (info.json, "
                             f"profiler_info's DeviceInfo) give as {v!r}; pass peak_flops=<FLOP/s of one device>")
    per_cycle = float(device.get("cube_flops_per_cycle") or DA_VINCI_CUBE_FLOPS_PER_CYCLE)
    return per_cycle * float(cores) * float(mhz) * 1e6


def step_lengths(breakdown: pd.DataFrame) -> np.ndarray:
    """Each step_breakdown row's step period (us): Computing + Communication(Not Overlapped) + Free."""
    return breakdown[list(PARTS)].to_numpy(np.float64).sum(axis=1)


def mfu_table(breakdown: pd.DataFrame, bounds: pd.DataFrame, facts: ModelFacts, peak: float) -> pd.DataFrame:
    """Per step of one rank's ``breakdown`` (its step_breakdown) and step ``bounds``: :func:`mfu_rows`.
    ``Whole Period`` is False for a step that spans only itself (the first of a collection window)."""
    if breakdown.empty:
        return pd.DataFrame(columns=COLUMNS)
    steps = pd.to_numeric(breakdown["Step"], errors="coerce").to_numpy()
    return mfu_rows(steps, step_lengths(breakdown), whole_periods(breakdown, bounds), facts, peak)


def mfu_rows(steps: np.ndarray, lengths_us: np.ndarray, whole: np.ndarray, facts: ModelFacts,
             peak: float) -> pd.DataFrame:
    """Per step: its time, the job's model FLOPs, the FLOP/s each of ``facts.world_size`` devices achieved
    (model FLOPs / (devices x step time)) and the MFU against ``peak`` (FLOP/s)."""
    lengths_us = np.asarray(lengths_us, np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        achieved = np.where(lengths_us > 0, facts.step_flops / (facts.world_size * lengths_us * 1e-6), np.nan)
    out = pd.DataFrame({
        "Step": steps,
        "Step Time(us)": lengths_us.round(3),
        "Whole Period": np.asarray(whole, bool),
        "Tokens": facts.tokens,
        "Model FLOPs": facts.step_flops,
        "Devices": facts.world_size,
        "Achieved TFLOPS per Device": achieved / 1e12,
        "Peak TFLOPS per Device": peak / 1e12,
        "MFU(%)": 100.0 * achieved / peak,
    })
    return out[COLUMNS]
