"""export.pieces: rows of text gathered from dictionary-encoded pieces, msprof's µs texts, and CSV
cells formatted once per key."""

import numpy as np
import pandas as pd
import pytest

from geprof_nb.analysis.export import cells, pieces


def _us(ns, before="", after=""):
    return [f"{before}{x // 1000}.{x % 1000:03d}{after}" for x in ns.tolist()]


@pytest.mark.parametrize("before, after", [("", ""), ('"', '"'), ("", "\t"), ("ü", "000")])
def test_us_texts_are_pythons_floor_division_texts(before, after, monkeypatch):
    monkeypatch.setattr(pieces, "_ROWS_PER_BLOCK", 7)  # several blocks of rows
    rng = np.random.default_rng(3)
    cases = [np.array([0, 5, 999, 1000, 9999]), np.array([-5, 3, -1001]), np.array([], np.int64),
             np.array([2**63 - 1]), rng.integers(0, 10**4, 100), rng.integers(10**18, 2 * 10**18, 300)]
    cases += [rng.integers(10 ** (w + 2), 10 ** (w + 3), 40) for w in range(1, 16)]  # every digit count
    for ns in cases:
        assert pieces.us_texts(ns, before, after).to_pylist() == _us(ns, before, after)


def test_rows_are_their_pieces_concatenated_in_chunks(monkeypatch):
    monkeypatch.setattr(pieces, "_PIECES_PER_CHUNK", 7)  # several chunks
    n = 50
    rng = np.random.default_rng(1)
    small = pieces.Coded(rng.integers(0, 3, n), pieces.texts(["a", "bb", "é"]))
    big = pieces.per_row(pieces.texts([f"r{i}" for i in range(n)]))
    one = pieces.Coded(np.zeros(n, np.int64), pieces.texts(["only"]))
    other = pieces.Coded(rng.integers(0, 2, n), pieces.texts(["x", "yz"]))
    # constants, a column of one text, a column repeated side by side, small columns side by side
    cols = ["<", small, ",", big, "", one, ">", big, big, ";", small, other, "\n"]
    want = "".join(f"<{s},{b}only>{b}{b};{s}{o}\n" for s, b, o in zip(small.tolist(), big.tolist(), other.tolist()))
    assert len(pieces._merged(cols, n)) == 5  # "<" small ",": 1, big, "only>", big big: 1, ";" small other "\n": 1
    got = b"".join(bytes(c) for c in pieces.row_bytes(cols, 0, n)).decode()
    assert got == want
    part = b"".join(bytes(c) for c in pieces.row_bytes(cols, 10, 23)).decode()
    assert part == "".join(want.splitlines(keepends=True)[10:23])
    assert list(pieces.row_bytes(["x"], 0, 0)) == []


def test_coded_helpers():
    col = pieces.by_value(np.array([3.0, np.nan, 3.0, 1.5]), lambda u: [f"{x:g}" for x in u], missing="N/A")
    assert col.tolist() == ["3", "N/A", "3", "1.5"]
    assert col.set(0, "0").tolist() == ["0", "N/A", "3", "1.5"]
    assert col.map(str.lower).joined("[", "]").tolist() == ["[3]", "[n/a]", "[3]", "[1.5]"]


def test_table_cells_formatted_per_key_are_the_cells_formatted_per_row():
    rng = np.random.default_rng(5)
    key = rng.integers(0, 6, 200)
    per_key = np.array([0.5, np.nan, -0.0, 2.25, 1e-7, 3.0])[key]
    frame = pd.DataFrame({
        "name": pd.Categorical(np.array(["a", "=b", "c,d", "e", "f", "g"], dtype=object)[key]),
        "Input Shapes": pd.Categorical(np.array(["1,2", "N/A", "3", "4", "5", "6"], dtype=object)[key]),
        "per key": per_key, "per row": rng.random(200), "ints": pd.array(np.where(key == 2, None, key * 7), "Int64"),
        "per key again": per_key, "varies": np.where(rng.random(200) < 0.5, per_key, 1.0)})
    by_key = cells.table_cells(frame, quote=["Input Shapes"], key=key)
    by_row = cells.table_cells(frame, quote=["Input Shapes"])
    assert [c.tolist() for c in by_key] == [c.tolist() for c in by_row]
    assert by_key[2].codes is by_key[0].codes  # per-key columns share the key's codes (one piece when side by side)


def test_float_cells_are_pythons_fixed_point_texts():
    rng = np.random.default_rng(11)
    values = np.concatenate([rng.random(3000) * 10.0 ** rng.integers(-6, 18, 3000),  # every magnitude
                             rng.integers(-10**6, 10**6, 3000) / 2000.0,  # exact halves of the last digit
                             rng.integers(0, 10**7, 3000) / 1000.0,
                             [0.0, -0.0, -1e-9, np.nan, np.inf, -np.inf, 0.0625, 2.0**52 + 0.5, 1e300, 5e-324]])
    want = ["N/A" if x != x else f"{x:.3f}" for x in values.tolist()]
    assert len(values) >= cells._FIXED_IN_ARRAYS  # formatted in arrays
    assert cells.float_cells(values).tolist() == want
    assert cells.float_cells(values[:100]).tolist() == want[:100]  # one by one
    positive = np.abs(values)
    assert cells.float_cells(positive).tolist() == ["N/A" if x != x else f"{x:.3f}" for x in positive.tolist()]
