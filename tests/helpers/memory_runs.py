"""Minimal run directories for the memory tables: static plans, a task log and step-trace ends."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from geprof_nb.analysis.rundir import RunDir
from geprof_nb.prof import rawdata

NAMES = {11: "conv1:0", 22: "relu:0", 33: "out:0", 44: "left:0", 55: "other_model:0"}
HELD = rawdata.HELD_TO_STEP_END


def write_memory_run(path: Path, plans: list[tuple[int, int, list[tuple]]], tasks: list[tuple],
                     step_ends: list[tuple], names: dict[int, str] = NAMES, chunks: int = 2) -> RunDir:
    """A minimal run directory of device 0: info.json, the hash dictionary, the plans
    ((model id, pool size, rows)), the task log (in ``chunks`` chunks) and the step trace's model ends."""
    path.mkdir(parents=True)
    (path / rawdata.INFO_FILE).write_text(json.dumps({"geprof_raw_version": 1, "status": "complete",
                                                      "devices": {"0": {}}}))
    (path / rawdata.HASH_DICT_FILE).write_text("".join(json.dumps({"id": str(h), "s": s}) + "\n"
                                                       for h, s in names.items()))
    data = path / rawdata.device_dir(0)
    data.mkdir(parents=True)

    def save(kind: str, seq: int, arr: np.ndarray) -> None:
        np.save(data / rawdata.chunk_name(kind, seq), arr, allow_pickle=False)

    mem = np.zeros(sum(len(rows) for _, _, rows in plans), rawdata.STATIC_OP_MEM_DTYPE)
    track = []
    k = 0
    for model, pool, rows in plans:
        for tensor, addr, size, alloc, free, stream in rows:
            mem[k] = (model, tensor, addr, size, alloc, free, stream, pool)
            track += [(alloc, model), (free, model)] if free != HELD else [(alloc, model)]
            k += 1
    save("static_op_mem", 0, mem)
    tt = np.zeros(len(track), rawdata.TASK_TRACK_DTYPE)
    tt["connection_id"], tt["model_id"] = zip(*track) if track else ((), ())
    save("task_track", 0, tt)
    hw = np.zeros(len(tasks), rawdata.HWTS_DTYPE)
    if len(tasks):
        hw["connection_id"], hw["iteration"], hw["start"], hw["dur"] = zip(*tasks)
    for seq, part in enumerate(np.array_split(hw, chunks)):
        save("hwts", seq, part)
    st = np.zeros(len(step_ends), rawdata.STEP_TRACE_DTYPE)
    if len(step_ends):
        st["model_id"], st["index_id"], st["timestamp"] = zip(*step_ends)
        st["tag_id"] = rawdata.MODEL_END_TAG
    save("step_trace", 0, st)
    return RunDir(path)
