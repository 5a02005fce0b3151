"""Raw records -> the msprof summary tables, vectorised with numpy and pandas.

Column names and meanings are msprof's (:mod:`.columns`).  In the DataFrames
numbers are numbers: times are float microseconds (durations exact to the ns,
absolute timestamps within float64 precision), integer columns that can be
N/A are nullable ``Int64``, missing metrics are NaN, and text columns are
categoricals holding ``"N/A"`` where msprof prints N/A.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ...prof import rawdata
from ...prof.rawdata import DataType, Format, GeTaskType, OpFlag, RtTaskType
from ..rundir import RunDir
from . import columns as C
from . import pmu
from .indexing import scatter, take_records

NA = "N/A"
_DTYPE_NAMES = {int(d): d.name[len("DT_"):] for d in DataType}
_DTYPE_NAMES[int(DataType.DT_FLOAT)] = "FLOAT"
_FORMAT_NAMES = {int(f): f.name[len("FORMAT_"):] for f in Format}
_TASK_TYPE_NAMES = {int(k): v for k, v in rawdata.GE_TASK_TYPE_NAMES.items()}
_DROPPED_TASK_TYPES = {int(GeTaskType.WRITE_BACK), int(GeTaskType.INVALID)}


@dataclass
class OpRows:
    """op_summary and what lies beside each of its rows (not msprof columns)."""

    frame: pd.DataFrame
    iteration: np.ndarray  # Iteration ID of each row
    start_ns: np.ndarray  # exact start time of each row in ns
    connection_id: np.ndarray


def _categorical(per_conn: np.ndarray, conn: np.ndarray) -> pd.Categorical:
    """Row values ``per_conn[conn]`` as a categorical of the values that occur, in first-seen order
    of the small per-connection table (factorised there, so rows cost one gather and one count)."""
    codes, uniques = pd.factorize(per_conn)
    return _used_categories(codes, uniques, conn)


def _used_categories(codes: np.ndarray, uniques: np.ndarray, conn: np.ndarray) -> pd.Categorical:
    """:func:`_categorical` of the per-connection table factorised as ``codes`` into ``uniques``."""
    row_codes = codes[conn]
    used = np.bincount(row_codes, minlength=len(uniques)) > 0 if len(row_codes) else np.zeros(len(uniques), bool)
    remap = (np.cumsum(used) - 1).astype(row_codes.dtype)
    return pd.Categorical.from_codes(remap[row_codes], categories=pd.Index(uniques[used], dtype=object))


def _distinct_rows(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the distinct rows of the 2-D ``a`` in first-seen order, each row's index into them).

    Each row is hashed as one opaque value; ``np.unique(axis=0)`` sorts the rows as records,
    ~20x slower than the whole op table it feeds at a few thousand tensors.
    """
    whole_rows = np.ascontiguousarray(a).view(np.dtype((np.void, a.dtype.itemsize * a.shape[1]))).ravel()
    codes, uniques = pd.factorize(whole_rows)
    first = np.unique(codes, return_index=True)[1]
    return a[first], codes


def _joined_runs(texts: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """``";".join`` of each run of ``texts`` (object array of str), a run beginning where ``starts`` is True.

    Done as one join and one split on a separator no text holds (texts are dims, dtype and
    format names), instead of a join per run.
    """
    pieces = np.full(2 * len(texts), ";", dtype=object)
    pieces[0::2][starts] = "\n"
    pieces[1::2] = texts
    return np.array("".join(pieces[1:].tolist()).split("\n"), dtype=object)


def _tensor_strings(tensors: np.ndarray) -> tuple[np.ndarray, list[np.ndarray]]:
    """(connection ids, [input shapes, input types, input formats, output shapes, output types,
    output formats] of each, as object arrays of text).

    The ids are those of the records, ops without tensors too (their texts are empty).  The
    records are flattened to one row per tensor with array operations; each distinct shape, data
    type and format is turned into text once, and each op's texts are joined in tensor order.
    """
    num = np.minimum(tensors["tensor_num"].astype(np.int64), rawdata.TENSORS_PER_RECORD)
    rec = np.repeat(np.arange(len(tensors)), num)
    slot = np.arange(len(rec)) - np.repeat(np.cumsum(num) - num, num)
    output = tensors["tensor_type"][rec, slot] != rawdata.TensorType.INPUT
    shapes, shape_of = _distinct_rows(tensors["shape"][rec, slot])
    shape_text = [",".join(map(str, dims[: dims.index(0)] if 0 in dims else dims)) for dims in shapes.tolist()]
    dtypes, dtype_of = np.unique(tensors["data_type"][rec, slot], return_inverse=True)
    dtype_text = [_DTYPE_NAMES.get(int(d), "UNDEFINED") for d in dtypes]
    formats, format_of = np.unique(tensors["format"][rec, slot], return_inverse=True)
    format_text = [_FORMAT_NAMES.get(int(f), "RESERVED") for f in formats]
    cids, op_of = np.unique(tensors["connection_id"], return_inverse=True)
    group = op_of.ravel()[rec] * 2 + output  # (op, input/output), tensors in record and slot order within
    order = np.argsort(group, kind="stable")
    group = group[order]
    starts = np.r_[True, group[1:] != group[:-1]] if len(group) else np.zeros(0, bool)
    op, is_output = group[starts] // 2, group[starts] % 2 == 1
    out = [np.full(len(cids), "", dtype=object) for _ in range(6)]
    for k, (text, of) in enumerate(((shape_text, shape_of), (dtype_text, dtype_of), (format_text, format_of))):
        joined = _joined_runs(np.array(text, dtype=object)[of.ravel()[order]], starts) if len(group) else []
        for base, side in ((0, ~is_output), (3, is_output)):
            out[base + k][op[side]] = joined[side] if len(group) else joined
    return cids, out


@dataclass
class _Executed:
    """The hwts records that are op_summary rows (kept, in start order) and, indexed by connection id,
    what their columns are read from."""

    hw: np.ndarray
    conn: np.ndarray  # each row's connection id
    n_conn: int
    track: np.ndarray
    basic: np.ndarray
    kernel_name: np.ndarray  # the kernel's name hash (0: not a kernel)
    ge_type: np.ndarray  # the GE task type (-1: no basic info)
    has_basic: np.ndarray


def _executed(run: RunDir, device_id: int) -> _Executed:
    """op_summary's rows: the executed kernel tasks but write-backs and invalid ones, by start time."""
    hw = run.load("hwts", device_id)
    track = run.load("task_track", device_id)
    basic = run.load("node_basic_info")
    # host records (basic info) may name connections the device data no longer has (a lost chunk)
    n_conn = 1 + max(int(track["connection_id"].max(initial=0)), int(hw["connection_id"].max(initial=0)),
                     int(basic["connection_id"].max(initial=0)))
    kernel_name = scatter(n_conn, track["connection_id"], track["kernel_name"], 0, np.uint64)
    keep = kernel_name[hw["connection_id"]] != 0
    has_basic = scatter(n_conn, basic["connection_id"], True, False, bool)
    ge_type = scatter(n_conn, basic["connection_id"], basic["task_type"], -1, np.int64)
    keep &= ~np.isin(ge_type[hw["connection_id"]], list(_DROPPED_TASK_TYPES))
    rows = np.flatnonzero(keep)
    hw = take_records(hw, rows[np.argsort(hw["start"][rows], kind="stable")])  # one copy: kept rows in start order
    conn = hw["connection_id"].astype(np.int64)
    return _Executed(hw, conn, n_conn, track, basic, kernel_name, ge_type, has_basic)


def _hash_texts(run: RunDir, ids: np.ndarray, na_mask: np.ndarray | None = None) -> np.ndarray:
    """The strings of hash ``ids`` (N/A for 0 and where ``na_mask``)."""
    names = run.hashes
    get = names.get
    distinct, of = np.unique(ids, return_inverse=True)  # each name looked up once
    text = np.array([(get(h) or (f"<unknown 0x{h:016x}>" if h not in names else "")) if h else NA
                     for h in distinct.tolist()], dtype=object)
    out = text[of.ravel()]
    if na_mask is not None:
        out[na_mask] = NA
    return out


def _hash_categorical(run: RunDir, ids: np.ndarray, conn: np.ndarray,
                      na_mask: np.ndarray | None = None) -> pd.Categorical:
    """``_categorical(_hash_texts(run, ids, na_mask), conn)``, factorised on the ids (numbers hash faster than
    the strings) and each distinct id named once."""
    if na_mask is not None:
        ids = np.where(na_mask, np.uint64(0), ids)  # 0 is N/A too
    id_codes, distinct = pd.factorize(ids)
    text_codes, uniques = pd.factorize(_hash_texts(run, np.asarray(distinct, np.uint64)))
    return _used_categories(text_codes[id_codes], uniques, conn)


def _task_type_texts(ge_type: np.ndarray) -> np.ndarray:
    get = _TASK_TYPE_NAMES.get
    distinct, of = np.unique(ge_type, return_inverse=True)  # each type named once
    return np.array([get(t, NA) for t in distinct.tolist()], dtype=object)[of.ravel()]


#: The columns of :func:`op_spans`.
SPAN_COLUMNS = ["Model ID", "Op Name", "OP Type", "Task Type", "Task Duration(us)"]


def op_spans(run: RunDir, device_id: int = 0) -> OpRows:
    """op_summary's rows with only :data:`SPAN_COLUMNS` (equal to :func:`op_rows`' columns): what the
    step split and the collective tables read.  The columns left out (shapes, PMU, ...) take most of
    op_rows' time, which a cluster of hundreds of ranks pays per rank."""
    x = _executed(run, device_id)
    model_id = scatter(x.n_conn, x.track["connection_id"], x.track["model_id"], 0, np.int64)
    op_type_ids = scatter(x.n_conn, x.basic["connection_id"], x.basic["op_type"], 0, np.uint64)
    frame = pd.DataFrame({
        "Model ID": model_id[x.conn],
        "Op Name": _hash_categorical(run, x.kernel_name, x.conn),
        "OP Type": _hash_categorical(run, op_type_ids, x.conn, ~x.has_basic),
        "Task Type": _categorical(_task_type_texts(x.ge_type), x.conn),
        "Task Duration(us)": x.hw["dur"] / 1000.0,
    })
    return OpRows(frame, x.hw["iteration"].astype(np.int64), x.hw["start"].astype(np.int64), x.conn)


def op_rows(run: RunDir, device_id: int = 0) -> OpRows:
    """Build op_summary: one row per executed op task (compute and communication)."""
    opts = run.options
    task_level = {"on": "l1"}.get(opts.get("task_trace", "on"), opts.get("task_trace", "on"))
    family = run.device_info(device_id).get("chip_family", "A2")
    aic_metrics = ((run.info.get("pmu_events") or {}).get("metrics") or [""])[0]
    header = C.op_summary_columns(family, task_level, aic_metrics)

    x = _executed(run, device_id)
    hw, conn, n_conn, track, basic = x.hw, x.conn, x.n_conn, x.track, x.basic
    ge_type, has_basic = x.ge_type, x.has_basic
    n = len(hw)

    # a collective by its GE task type, or (task_trace l0 records no basic info) by the runtime's task track
    is_comm = (ge_type == GeTaskType.HCCL) | (scatter(n_conn, track["connection_id"], track["task_type"], -1,
                                                      np.int64) == RtTaskType.HCCL)
    no_basic = ~has_basic
    op_type_ids = scatter(n_conn, basic["connection_id"], basic["op_type"], 0, np.uint64)
    block_dim = scatter(n_conn, basic["connection_id"], basic["block_dim"], 0, np.int64)
    op_flag = scatter(n_conn, basic["connection_id"], basic["op_flag"], 0, np.int64)
    task_type_text = _task_type_texts(ge_type)
    state_text = np.where(op_flag & OpFlag.DYNAMIC, "dynamic", "static").astype(object)
    state_text[is_comm | no_basic] = NA

    tensor_cids, tensor_text = _tensor_strings(run.load("tensor_info"))
    has_text = tensor_cids < n_conn
    has_text[has_text] = ~is_comm[tensor_cids[has_text]]
    tensor_cols = [np.full(n_conn, NA, dtype=object) for _ in range(6)]
    for k in range(6):
        tensor_cols[k][tensor_cids[has_text]] = tensor_text[k][has_text]
    hf32 = np.where(op_flag & OpFlag.HF32_ELIGIBLE, "YES", "NO").astype(object)
    hf32[is_comm | no_basic] = NA

    floats = ["Task Start Time(us)", "Task Duration(us)", "Task Wait Time(us)"]
    floats += [c for c in pmu.float_columns(aic_metrics, family) if c in header]
    block = np.empty((len(floats), n))  # the float columns, one row each: the DataFrame's float block
    column = {c: block[k] for k, c in enumerate(floats)}
    start_ns = hw["start"].astype(np.int64)
    end_ns = start_ns + hw["dur"].astype(np.int64)
    np.divide(start_ns, 1000.0, out=column["Task Start Time(us)"])
    dur_us = column["Task Duration(us)"]
    np.divide(hw["dur"], 1000.0, out=dur_us)
    wait_times(start_ns, end_ns, is_comm[conn], out=column["Task Wait Time(us)"])
    del end_ns

    ctx = run.load("context_id_info")
    context_id = scatter(n_conn, ctx["connection_id"], ctx["context_ids"][:, 0] if len(ctx) else [], 0, np.int64)
    has_context = scatter(n_conn, ctx["connection_id"], True, False, bool)
    model_id = scatter(n_conn, track["connection_id"], track["model_id"], 0, np.int64)
    stream_id = scatter(n_conn, track["connection_id"], track["stream_id"], 0, np.int64)
    task_id = scatter(n_conn, track["connection_id"], track["task_id"], 0, np.int64)

    def nullable(per_conn: np.ndarray, na: np.ndarray) -> pd.arrays.IntegerArray:
        arr = pd.array(per_conn[conn], dtype="Int64")
        arr[na[conn]] = pd.NA
        return arr

    data: dict[str, object] = {
        "Device_id": np.full(n, device_id, np.int64),
        "Model ID": model_id[conn],
        "Task ID": nullable(task_id, is_comm),
        "Stream ID": nullable(stream_id, is_comm),
        "Op Name": _hash_categorical(run, x.kernel_name, conn),
        "OP Type": _hash_categorical(run, op_type_ids, conn, no_basic),
        "OP State": _categorical(state_text, conn),
        "Task Type": _categorical(task_type_text, conn),
        "Block Num": pd.array(np.where(is_comm | no_basic, 0, block_dim)[conn], dtype="Int64"),
        "Mix Block Num": nullable(scatter(n_conn, basic["connection_id"], basic["mix_block_dim"], 0, np.int64),
                                  is_comm),
        "HF32 Eligible": _categorical(hf32, conn),
        "Context ID": nullable(context_id, ~has_context),
    }
    for k, col in enumerate(("Input Shapes", "Input Data Types", "Input Formats", "Output Shapes",
                             "Output Data Types", "Output Formats")):
        data[col] = _categorical(tensor_cols[k], conn)
    if any(c in header for c in C.pmu_columns(aic_metrics, family)):
        data.update(pmu.pmu_columns(run, device_id, conn, n_conn, block_dim[conn],
                                    hw["block_cycles"].astype(np.int64), dur_us, family, aic_metrics, out=column))
    return OpRows(_frame(header, floats, block, data), hw["iteration"].astype(np.int64), start_ns, conn)


def wait_times(start_ns: np.ndarray, end_ns: np.ndarray, is_comm: np.ndarray,
               out: np.ndarray | None = None) -> np.ndarray:
    """op_summary's ``Task Wait Time(us)`` of rows in start order: msprof's wait, the gap after the previous
    compute task (0 for the first and for collectives)."""
    wait_us = np.zeros(len(start_ns)) if out is None else out
    wait_us.fill(0.0)
    idx = np.flatnonzero(~np.asarray(is_comm, bool))
    if len(idx) > 1:
        wait_us[idx[1:]] = np.maximum(start_ns[idx[1:]] - end_ns[idx[:-1]], 0) / 1000.0
    return wait_us


def _frame(header: list[str], floats: list[str], block: np.ndarray, data: dict[str, object]) -> pd.DataFrame:
    """The columns in ``header`` order.  The float columns are the rows of ``block``, which becomes
    the frame's float block as it is: pandas would copy separate arrays to consolidate them, and
    a 1M-row op_summary holds ~200 MB of floats.  The names are inserted into an object Index and
    the header set once at the end: inserting into a str (pyarrow) Index rebuilds it every time."""
    frame = pd.DataFrame(block.T, columns=pd.Index(floats, dtype=object), copy=False)
    for loc, c in enumerate(header):
        if c not in floats:
            frame.insert(loc, c, data[c])
    frame.columns = pd.Index(header)
    return frame


_OP_STATISTIC_KEYS = ("Device_id", "OP Type", "Task Type")


def _array(column: pd.Series) -> object:
    """The column's values: its extension array (categorical, nullable, str), else its numpy array."""
    return column.array if isinstance(column.dtype, pd.api.extensions.ExtensionDtype) else column.to_numpy()


def op_statistic(op_summary: pd.DataFrame) -> pd.DataFrame:
    """Per OP Type and Core Type: count and total/min/avg/max duration, share of the total.

    The groups are those of ``groupby(["Device_id", "OP Type", "Task Type"], observed=True)``,
    in its order (each key sorted, a categorical by its categories), summed by the same
    (compensated) group sums; the keys are combined into one integer per row first, as a frame
    groupby on three keys costs ~10 ms whatever the number of rows.
    """
    compute = (op_summary["Task Type"] != "COMMUNICATION").to_numpy()
    if not compute.any():
        return pd.DataFrame(columns=C.OP_STATISTIC)
    keys = [pd.factorize(_array(op_summary[c])[compute], sort=True) for c in _OP_STATISTIC_KEYS]
    combined = np.zeros(int(compute.sum()), np.int64)
    has_keys = np.ones(len(combined), bool)  # groupby drops rows with a missing key
    for codes, uniques in keys:
        combined = combined * len(uniques) + codes
        has_keys &= codes >= 0
    groups, group_of = np.unique(combined[has_keys], return_inverse=True)
    grouped = pd.Series(op_summary["Task Duration(us)"].to_numpy()[compute][has_keys]).groupby(group_of.ravel())
    total = grouped.sum().to_numpy()
    key_at = {}
    for name, (codes, uniques) in zip(_OP_STATISTIC_KEYS[::-1], keys[::-1]):
        key_at[name] = groups % len(uniques)
        groups = groups // len(uniques)
    device = keys[0][1].take(key_at["Device_id"])
    device_total = pd.Series(total).groupby(key_at["Device_id"]).transform("sum").to_numpy()
    stats = pd.DataFrame({
        "Device_id": device,
        "OP Type": pd.Series(keys[1][1].take(key_at["OP Type"])).astype(str),
        "Core Type": pd.Series(keys[2][1].take(key_at["Task Type"])).astype(str),
        "Count": grouped.count().to_numpy(),
        "Total Time(us)": total.round(3),
        "Min Time(us)": grouped.min().to_numpy().round(3),
        "Avg Time(us)": grouped.mean().to_numpy().round(3),
        "Max Time(us)": grouped.max().to_numpy().round(3),
        "Ratio(%)": (total / device_total * 100).round(3),
    })
    order = np.argsort(-stats["Total Time(us)"].to_numpy(), kind="stable")  # descending, ties kept in group order
    return stats.take(order).reset_index(drop=True)


def _tag_times(keys: np.ndarray, inverse: np.ndarray, tags: np.ndarray, ts: np.ndarray, tag: int) -> np.ndarray:
    """Timestamp (int ns) of ``tag`` per (model, iteration) key, -1 where the tag is missing."""
    out = np.full(len(keys), -1, np.int64)
    sel = tags == tag
    out[inverse[sel][::-1]] = ts[sel][::-1]  # first occurrence wins
    return out


def _first_times(keys: np.ndarray, inverse: np.ndarray, ts: np.ndarray) -> np.ndarray:
    """Earliest timestamp (int ns) of each key's records."""
    out = np.full(len(keys), np.iinfo(np.int64).max, np.int64)
    np.minimum.at(out, inverse, ts)
    return out


def collection_windows(run: RunDir, first_ns: np.ndarray) -> np.ndarray:
    """The collection window each step was recorded in: how many windows of info.json's
    ``switch_history`` (every msprof START: a step schedule's windows, aclgrphProfStart) had started
    by the step's first timestamp ``first_ns``.  A step's device work starts after its host launch,
    which is inside its window, and a window starts after the previous one stopped, so steps with
    the same number ran without the collection stopping between them."""
    starts = np.sort(np.array([w["start_ns"] for w in run.info.get("switch_history") or ()], dtype=np.int64))
    return np.searchsorted(starts, first_ns, side="right").astype(np.int64)


def follows_previous(model: np.ndarray, iteration: np.ndarray, window: np.ndarray) -> np.ndarray:
    """Whether each step (rows sorted by model, then iteration) has the row before it as its predecessor:
    the same model, the iteration right before and the same collection window.  A step after a gap or
    after the collection stopped and restarted has none (msprof: the first iteration), so the time
    the steps were not collected is counted neither as Data Aug Bound nor as Free time."""
    same = (model[1:] == model[:-1]) & (iteration[1:] == iteration[:-1] + 1) & (window[1:] == window[:-1])
    return np.r_[False, same]


def _us(ns: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """int ns -> float us, NaN where not valid (done on integers first, so durations stay exact)."""
    return np.where(valid, ns / 1000.0, np.nan)


def step_trace(run: RunDir, device_id: int = 0) -> pd.DataFrame:
    """One row per (model, iteration) from the ProfilerTrace timestamps (msprof create_step_table).

    Durations are differences of integer ns, so they are exact to the ns.
    """
    tr = run.load("step_trace", device_id)
    if len(tr) == 0:
        return pd.DataFrame(columns=C.STEP_TRACE)
    model = tr["model_id"].astype(np.int64)
    it = tr["index_id"].astype(np.int64)
    keys, inverse = np.unique(np.stack([model, it], axis=1), axis=0, return_inverse=True)
    inverse = inverse.ravel()
    tags = tr["tag_id"].astype(np.int64)
    ts = tr["timestamp"].astype(np.int64)

    def tag(t: int) -> tuple[np.ndarray, np.ndarray]:
        v = _tag_times(keys, inverse, tags, ts, t)
        return v, v >= 0

    fp, has_fp = tag(rawdata.FP_TAG)
    bp, has_bp = tag(rawdata.BP_TAG)
    end, has_end = tag(rawdata.ITER_END_TAG)
    model_end, has_model_end = tag(rawdata.MODEL_END_TAG)
    end = np.where(has_end, end, model_end)
    has_end = has_end | has_model_end
    begin, has_begin = tag(rawdata.MODEL_START_TAG)
    # previous iteration end of the same model (keys are sorted by model, then iteration), in the same window
    window = collection_windows(run, _first_times(keys, inverse, ts))
    follows = follows_previous(keys[:, 0], keys[:, 1], window)
    prev_end = np.r_[0, end[:-1]]
    has_prev = follows & np.r_[False, has_end[:-1]]

    data = {
        "Device_id": np.full(len(keys), device_id, np.int64),
        "Iteration ID": keys[:, 1],
        "FP Start(us)": _us(fp, has_fp),
        "BP End(us)": _us(bp, has_bp),
        "Iteration End(us)": _us(end, has_end),
        "Iteration Time(us)": _us(end - begin, has_end & has_begin),
        "FP to BP Time(us)": _us(bp - fp, has_fp & has_bp),
        "Iteration Refresh(us)": _us(end - bp, has_end & has_bp),
        "Data Aug Bound(us)": _us(fp - prev_end, has_fp & has_prev),
        "Model ID": keys[:, 0],
    }
    parts = [pd.DataFrame(data)[C.STEP_TRACE]]
    ar_tags = tags[(tags >= rawdata.ALL_REDUCE_START_TAG) & (tags < rawdata.GET_NEXT_START_TAG)]
    n_reduce = int((ar_tags.max() - rawdata.ALL_REDUCE_START_TAG) // 2 + 1) if len(ar_tags) else 0
    if n_reduce:
        reduces = []
        for k in range(n_reduce):
            s, has_s = tag(rawdata.ALL_REDUCE_START_TAG + 2 * k)
            e, has_e = tag(rawdata.ALL_REDUCE_START_TAG + 2 * k + 1)
            reduces += [_us(s, has_s), _us(e - s, has_s & has_e)]
        parts.append(pd.DataFrame(np.stack(reduces, axis=1), columns=C.STEP_TRACE_REDUCE * n_reduce))
    if (tags >= rawdata.GET_NEXT_START_TAG).any():
        parts.append(_get_next_columns(len(keys), inverse, tags, ts))
    return pd.concat(parts, axis=1) if len(parts) > 1 else parts[0]


def repeated_steps(run: RunDir, device_id: int = 0) -> dict[tuple[int, int], int]:
    """(Model ID, Iteration ID) pairs that more than one step recorded, with how many model-start tags
    each has.  Real GE never gives one process two models of the same id (its ids only grow), so this is
    data of another origin (two processes' records in one directory, say); step_trace has one row per
    pair and the op rows one Iteration ID, so those steps fold together: the run's notes say so."""
    tr = run.load("step_trace", device_id)
    starts = tr[tr["tag_id"] == rawdata.MODEL_START_TAG]
    if len(starts) == 0:
        return {}
    pairs = np.stack([starts["model_id"].astype(np.int64), starts["index_id"].astype(np.int64)], axis=1)
    keys, counts = np.unique(pairs, axis=0, return_counts=True)
    return {(int(m), int(i)): int(n) for (m, i), n in zip(keys.tolist(), counts.tolist()) if n > 1}


def _get_next_columns(n_keys: int, inverse: np.ndarray, tags: np.ndarray, ts: np.ndarray) -> pd.DataFrame:
    """GetNext Start / End / Time per (model, iteration) key: from the earliest GetNext start tag
    (``20000 + 2k``) to the latest GetNext end tag (``20001 + 2k``) of the step, NaN where the step has
    no complete pair (one span per step, as msprof's timeline shows one GetNext slice per data fetch)."""
    is_get_next = tags >= rawdata.GET_NEXT_START_TAG
    is_start = is_get_next & ((tags - rawdata.GET_NEXT_START_TAG) % 2 == 0)
    is_end = is_get_next & ~is_start
    none = np.iinfo(np.int64).max
    start = np.full(n_keys, none, np.int64)
    np.minimum.at(start, inverse[is_start], ts[is_start])
    end = np.full(n_keys, -1, np.int64)
    np.maximum.at(end, inverse[is_end], ts[is_end])
    whole = (start != none) & (end >= start)
    return pd.DataFrame(dict(zip(C.STEP_TRACE_GETNEXT, (_us(start, whole), _us(end, whole), _us(end - start, whole)))))


def step_bounds(run: RunDir, device_id: int = 0) -> pd.DataFrame:
    """Exact (step, begin, end) ns per iteration of the main model (:func:`main_model_of`):
    begin at its model-start tag, end at its iteration-end (else model-end) tag; ``window``:
    the collection window it was recorded in (:func:`collection_windows`); ``model``: the main model."""
    tr = run.load("step_trace", device_id)
    if len(tr) == 0:
        return pd.DataFrame(columns=["step", "begin", "end", "window", "model"])
    model = main_model_of(tr["model_id"].astype(np.int64), tr["index_id"].astype(np.int64))
    tr = tr[tr["model_id"] == model]
    it = tr["index_id"].astype(np.int64)
    keys, inverse = np.unique(it, return_inverse=True)
    tags, ts = tr["tag_id"].astype(np.int64), tr["timestamp"].astype(np.int64)
    pairs = keys[:, None]
    begin = _tag_times(pairs, inverse, tags, ts, rawdata.MODEL_START_TAG)
    end = _tag_times(pairs, inverse, tags, ts, rawdata.ITER_END_TAG)
    end = np.where(end >= 0, end, _tag_times(pairs, inverse, tags, ts, rawdata.MODEL_END_TAG))
    window = collection_windows(run, _first_times(pairs, inverse, ts))
    return pd.DataFrame({"step": keys, "begin": begin, "end": end, "window": window,
                         "model": np.full(len(keys), model, np.int64)})


def main_model_of(model: np.ndarray, iteration: np.ndarray) -> int:
    """The model whose iterations are the steps, from step-trace records' model and iteration ids: the
    one with the most iterations, the lowest id among equals (as :func:`.breakdown.main_model` picks it
    from step_trace's rows; counting records would favour a model with more tags per step)."""
    pairs = np.unique(np.stack([model, iteration], axis=1), axis=0)
    ids, counts = np.unique(pairs[:, 0], return_counts=True)
    return int(ids[np.argmax(counts)])


TASK_TIME = ["Device_id", "kernel_name", "kernel_type", "stream_id", "task_id", "task_time(us)", "task_start(us)",
             "task_stop(us)"]


def task_time(run: RunDir, device_id: int = 0) -> pd.DataFrame:
    """Every executed device task (kernels, copies, event record/wait), by start time (msprof ``task_time``)."""
    hw = run.load("hwts", device_id)
    track = run.load("task_track", device_id)
    if len(hw) == 0:
        return pd.DataFrame(columns=TASK_TIME)
    n_conn = 1 + max(int(track["connection_id"].max(initial=0)), int(hw["connection_id"].max(initial=0)))
    hw = hw[np.argsort(hw["start"], kind="stable")]
    conn = hw["connection_id"].astype(np.int64)
    names = run.hashes
    kernel = scatter(n_conn, track["connection_id"], track["kernel_name"], 0, np.uint64)
    kernel_text = np.array([names.get(int(h), NA) if h else NA for h in kernel], dtype=object)
    rt = scatter(n_conn, track["connection_id"], track["task_type"], -1, np.int64)
    rt_types, rt_of = np.unique(rt, return_inverse=True)  # each runtime task type named once
    rt_text = np.array(rawdata.rt_task_type_names(rt_types.tolist()), dtype=object)[rt_of.ravel()]
    start = hw["start"].astype(np.int64)
    dur = hw["dur"].astype(np.int64)
    return pd.DataFrame({
        "Device_id": np.full(len(hw), device_id, np.int64),
        "kernel_name": _categorical(kernel_text, conn), "kernel_type": _categorical(rt_text, conn),
        "stream_id": scatter(n_conn, track["connection_id"], track["stream_id"], 0, np.int64)[conn],
        "task_id": scatter(n_conn, track["connection_id"], track["task_id"], 0, np.int64)[conn],
        "task_time(us)": dur / 1000.0, "task_start(us)": start / 1000.0, "task_stop(us)": (start + dur) / 1000.0,
    })
