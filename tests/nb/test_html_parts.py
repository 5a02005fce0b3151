"""nb/html_parts.py: the escaped HTML pieces and their text twins."""

from __future__ import annotations

import pandas as pd

from geprof_nb.nb import html_parts as H


def test_missing_nullable_ints_and_floats_read_n_a_in_html_and_text():
    df = pd.DataFrame({"Block Num": pd.array([4, None], dtype="Int64"), "Time(us)": [1.23456, float("nan")]})
    text = H.table_text(df, "t")
    assert text.splitlines()[0] == "t" and "1.235" in text and text.count("N/A") == 2
    page = H.table_html(df, "a <title>")
    assert page.count("<td>N/A</td>") == 2 and "<td>1.235</td>" in page and "<h4>a &lt;title&gt;</h4>" in page


def test_bounded_states_the_count():
    df = pd.DataFrame({"x": range(5)})
    assert H.bounded(df, "rows", 5)[1] == "rows: 5 rows" and len(H.bounded(df, "rows", 5)[0]) == 5
    top, title = H.bounded(df, "rows", 2)
    assert list(top["x"]) == [0, 1] and title == "rows: first 2 of 5 rows"


def test_advice_rows_are_coloured_by_priority_and_escaped():
    findings = pd.DataFrame({"Priority": ["High", "Low"], "Finding": ["<b>slow</b>", "ok"], "Share": [0.5, float("nan")]})
    page = H.advice_html(findings)
    assert f'<tr class="geprof-priority-high" style="background:{H.PRIORITY_COLORS["High"]}">' in page
    assert "&lt;b&gt;slow&lt;/b&gt;" in page and "<td>0.500</td>" in page and "<td>N/A</td>" in page
