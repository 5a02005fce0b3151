"""EventBlock (trace events as columns) writes exactly what json.dumps writes for the same events
as dicts, in msprof and Chrome form, with and without per-key grouping of the columns."""

import json

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from geprof_nb.analysis.export import tracejson as tj


def _items(n=300, seed=1):
    rng = np.random.default_rng(seed)
    conn = rng.integers(0, 20, n)
    names = np.array([f"op{c % 7}" if c % 5 else 'odd "name" {x}\nü' for c in conn], dtype=object)
    tasks = tj.EventBlock(n, [
        ("name", tj.strs(names)), ("pid", tj.const(3)), ("tid", tj.ints(conn % 4)),
        ("ts", tj.ts_ns(rng.integers(0, 10**18, n))), ("dur", tj.dur_ns(rng.integers(0, 10**6, n))), ("ph", tj.const("X")),
        ("args", tj.nested([("conn", tj.ints(conn)), ("ratio", tj.floats(rng.random(n))), ("per_conn", tj.floats(conn / 7)),
                            ("odd", tj.floats(np.where(conn % 3, np.nan, -0.0))), ("empty", tj.nested([]))]))],
        key=conn)
    ids = tj.strs([str(i) for i in range(n)])
    flows = tj.EventBlock(n, [("name", tj.const("f")), ("pid", tj.ints(conn % 3)), ("ph", tj.const("s")), ("id", ids),
                              ("ts", tj.ts_ns(conn * 1000 + 7))],
                          pairs=[("name", tj.const("f")), ("tid", tj.ints(conn % 5)), ("ph", tj.const("f")), ("id", ids),
                                 ("ts", tj.ts_ns(rng.integers(0, 10**15, n))), ("bp", tj.const("e"))],
                          key=conn, pair_key=conn)
    not_per_key = tj.EventBlock(n, [("name", tj.strs(names[::-1].copy())), ("ts", tj.ts_ns(conn)),
                                    ("dur", tj.dur_ns(conn[::-1].copy()))], key=conn)
    no_ts = tj.EventBlock(3, [("name", tj.const("k")), ("dur", tj.dur_ns([5, 6, 7]))])
    # str columns given as pandas and pyarrow values (escaped or not, missing values, repeated dictionary texts)
    text_kinds = tj.EventBlock(n, [
        ("category", tj.strs(pd.Categorical(names))), ("arrow", tj.strs(pa.array(names.tolist()))),
        ("plain_arrow", tj.strs(pa.array([f"id{i}" for i in range(n)]))),
        ("dictionary", tj.strs(pa.DictionaryArray.from_arrays(conn % 3, ["a", "b", "a"]))),
        ("series", tj.strs(pd.Series(names))), ("missing", tj.strs(pd.Series(np.where(conn % 4, names, None))))],
        key=conn)
    return [{"name": "process_name", "ph": "M", "args": {"name": "x"}}, tasks, {"name": "c", "ts": 5, "dur": 7, "ph": "X"},
            flows, tj.EventBlock(0, [("a", tj.const(1))]), not_per_key, no_ts, text_kinds]


@pytest.mark.parametrize("mode", [tj.MSPROF, tj.CHROME])
def test_blocks_write_what_json_dumps_writes_for_their_dicts(tmp_path, mode):
    items = _items()
    events = tj.expand(items)
    assert len(events) == tj.event_count(items)
    converted = tj.msprof_events(events) if mode == tj.MSPROF else tj.chrome_events(events, 3)
    tj.write_events(tmp_path / "t.json", items, mode, base_ns=3)
    assert (tmp_path / "t.json").read_text() == json.dumps(converted, ensure_ascii=False, separators=(",", ":"))


def test_wrapper_object_around_the_event_list(tmp_path):
    items = _items(50)
    wrapper = {"traceEvents": None, "displayTimeUnit": "ns", "otherData": {"run": "r", "time_base_ns": 3}}
    tj.write_events(tmp_path / "t.json", items, tj.CHROME, base_ns=3, wrapper=wrapper)
    want = dict(wrapper, traceEvents=tj.chrome_events(tj.expand(items), 3))
    assert (tmp_path / "t.json").read_text() == json.dumps(want, ensure_ascii=False, separators=(",", ":"))
