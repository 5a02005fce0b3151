"""``module_statistic``: device time per model module (a layer, its attention, its MLP), forward and backward.

msprof-analyze's ``module_statistic`` recipe answers "which layer costs what" from a real PyTorch run: the
user wraps ``nn.Module.__call__`` in mstx ranges of domain ``Module``, the recipe nests the framework ops in
those ranges by host time, the kernels under their ops by connection id, makes a ``[BACKWARD]`` twin of each
module from the forward/backward op links, and sums each op's kernel time (``totalKernelDuration(ns)``,
``opCount``).  Here the module comes from the op name itself: GE graphs name their ops by module path
(``model/layers.12/self_attn/qkv_proj/MatMulV2``), as the simulated LLMs do and as real GE graphs built from
named scopes do, and the gradient ops of an op are under ``gradients/<op name>_grad/``
(:func:`module_of`).  Op names without a ``/`` (a torch_npu run's kernel names) have no module: their rows
are counted under :data:`NO_MODULE`; the mstx ``Module`` ranges such a run may carry are not read.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from ..arguments import positive_integer

COLUMNS = ["Module", "Phase", "Count", "Total Time(us)", "Avg Time(us)", "Communication Time(us)", "Share(%)"]
#: The phases; ``N/A`` (msprof's not-available) for an op without a module path.
PHASES = ("forward", "backward", "optimizer", "N/A")
#: The forward phases of an inference engine's models (``Profile.model_phases``): a serving run's forward ops
#: are named for the engine step that ran them.
INFERENCE_PHASES = ("prefill", "decode")
#: The module of ops whose names carry no module path.
NO_MODULE = "(no module path)"
#: The scope autodiff puts gradient ops under, and the suffix of the scope of one op's gradient ops.
GRADIENTS, GRAD = "gradients", "_grad"
#: An optimizer's scope per variable: ``<optimizer>/update_<variable path>/<op>``.
UPDATE = "update_"
#: Pipeline transfers are scoped as Megatron names its p2p calls, ``pipeline/{send,recv}_{forward,backward}``:
#: ``forward`` moves activations (forward pass), ``backward`` their gradients (backward pass).
PIPELINE, BACKWARD_TRANSFER = "pipeline", "_backward"


def module_of(name: str) -> tuple[str, str]:
    """(module path, phase) of an op name.

    * ``gradients/<op name>_grad/<op>``: the module of ``<op name>``, backward; a gradient op outside an
      op's gradient scope (``gradients/<module>/weight_grad_accumulation/Add``) belongs to the components
      before its first ``*_grad*`` component, and one with none (a data-parallel bucket,
      ``gradients/dp_bucket_1/HcomAllReduce``) to its own scope;
    * ``<optimizer>/update_<variable>/<op>``: the module of the variable (``model/layers.0/mlp/down_proj``
      for ``.../down_proj/weight``), optimizer;
    * ``pipeline/send_backward/HcomSend`` (a gradient's pipeline transfer): ``pipeline/send_backward``,
      backward;
    * any other ``<module>/<op>``: ``<module>``, forward; a name without ``/``: :data:`NO_MODULE`, ``N/A``.
    """
    parts = name.split("/")
    if len(parts) < 2:
        return NO_MODULE, "N/A"
    if parts[0] == GRADIENTS:
        for i, part in enumerate(parts[1:-1], start=1):
            if GRAD in part:
                return ("/".join(parts[1:i]) or NO_MODULE), "backward"
        return "/".join(parts[:-1]), "backward"
    if len(parts) >= 4 and parts[1].startswith(UPDATE):
        variable = [parts[1][len(UPDATE):], *parts[2:-1]]
        return ("/".join(variable[:-1]) or NO_MODULE), "optimizer"
    backward = parts[0] == PIPELINE and parts[1].endswith(BACKWARD_TRANSFER)
    return "/".join(parts[:-1]), "backward" if backward else "forward"


def at_depth(module: str, depth: int) -> str:
    """The first ``depth`` components of a module path (the whole path if it has fewer)."""
    return module if module == NO_MODULE else "/".join(module.split("/")[:depth])


def module_statistic(ops: pd.DataFrame, communication: np.ndarray, depth: int = 2,
                     model_phases: Mapping[int, str] | None = None) -> pd.DataFrame:
    """Per module path cut at ``depth`` and phase: op task count, total, mean and communication time (us)
    and share of the device time of all of ``ops`` (the shares add up to 100), largest first.

    ``ops`` are op_summary rows (``Op Name``, ``Task Duration(us)``), ``communication`` which of them are
    collectives.  ``depth`` 2 gives layers (``model/layers.12``), 3 attention against MLP
    (``model/layers.12/self_attn``).  ``model_phases`` (Model ID -> prefill / decode) names the forward ops of
    those models for their engine step."""
    depth = positive_integer("depth", depth)
    if ops.empty:
        return pd.DataFrame(columns=COLUMNS)
    names = pd.Series(ops["Op Name"].to_numpy(object))
    distinct = names.drop_duplicates()
    found = {n: module_of(str(n)) for n in distinct}
    module = names.map(lambda n: at_depth(found[n][0], depth))
    phase = names.map(lambda n: found[n][1])
    if model_phases and "Model ID" in ops:
        model = pd.to_numeric(ops["Model ID"], errors="coerce").to_numpy(np.float64)
        forward = (phase == "forward").to_numpy()
        for name in sorted(set(model_phases.values())):
            ids = [m for m, p in model_phases.items() if p == name]
            phase = phase.mask(forward & np.isin(model, ids), name)
    dur = pd.to_numeric(ops["Task Duration(us)"], errors="coerce").fillna(0.0).to_numpy(np.float64)
    frame = pd.DataFrame({"Module": module, "Phase": phase, "_dur": dur,
                          "_comm": np.where(np.asarray(communication, bool), dur, 0.0)})
    out = frame.groupby(["Module", "Phase"], sort=False).agg(
        Count=("_dur", "size"), total=("_dur", "sum"), comm=("_comm", "sum")).reset_index()
    whole = float(dur.sum())
    out["Total Time(us)"] = out["total"].round(3)
    out["Avg Time(us)"] = (out["total"] / out["Count"]).round(3)
    out["Communication Time(us)"] = out["comm"].round(3)
    out["Share(%)"] = (100.0 * out["total"] / whole if whole > 0 else np.nan)
    out = out.sort_values(["total", "Module", "Phase"], ascending=[False, True, True], kind="stable")
    return out[COLUMNS].reset_index(drop=True)
