"""nb/html_parts.py: the escaped HTML pieces and their text twins."""

from __future__ import annotations

import re

import pandas as pd

from geprof_nb.nb import html_parts as H


def test_missing_nullable_ints_and_floats_read_n_a_in_html_and_text():
    df = pd.DataFrame({"Block Num": pd.array([4, None], dtype="Int64"), "Time(us)": [1.23456, float("nan")]})
    text = H.table_text(df, "t")
    assert text.splitlines()[0] == "t" and "1.235" in text and text.count("N/A") == 2
    page = H.table_html(df, "a <title>")
    assert page.count('<td align="right">N/A</td>') == 2 and '<td align="right">1.235</td>' in page
    assert "<h4>a &lt;title&gt;</h4>" in page


def test_bounded_states_the_count():
    df = pd.DataFrame({"x": range(5)})
    assert H.bounded(df, "rows", 5)[1] == "rows: 5 rows" and len(H.bounded(df, "rows", 5)[0]) == 5
    top, title = H.bounded(df, "rows", 2)
    assert list(top["x"]) == [0, 1] and title == "rows: first 2 of 5 rows"


def test_advice_rows_are_coloured_by_priority_and_escaped():
    findings = pd.DataFrame({"Priority": ["High", "Low"], "Finding": ["<b>slow</b>", "ok"], "Share": [0.5, float("nan")]})
    page = H.advice_html(findings)
    assert f'<tr class="geprof-priority-high" style="background:{H.PRIORITY_COLORS["High"]}">' in page
    assert "<td>&lt;b&gt;slow&lt;/b&gt;</td>" in page and '<td align="right">0.500</td>' in page
    assert '<td align="right">N/A</td>' in page and '<th align="right">Share</th>' in page


def cells(page: str) -> list[list[str]]:
    """The rows of an HTML table as (align, text) cells."""
    body = page.split("<tbody>", 1)[1].split("</tbody>", 1)[0]
    return [re.findall(r"<td( align=\"right\")?>(.*?)</td>", row) for row in body.split("</tr>") if row]


def test_numbers_are_right_aligned_with_thousands_separators_and_ids_without():
    df = pd.DataFrame({"Op Name": ["conv<1>", "relu"], "Task ID": pd.array([12345, None], dtype="Int64"),
                       "Count": [1234567, 8], "Total Time(us)": [1234567.891, 0.5], "Iteration ID": [1001, 1002],
                       "Model ID": [4294967295, 1]})
    page = H.table_html(df)
    assert cells(page) == [
        [("", "conv&lt;1&gt;"), (' align="right"', "12345"), (' align="right"', "1,234,567"),
         (' align="right"', "1,234,567.891"), (' align="right"', "1001"), (' align="right"', "4294967295")],
        [("", "relu"), (' align="right"', "N/A"), (' align="right"', "8"), (' align="right"', "0.500"),
         (' align="right"', "1002"), (' align="right"', "1")]]
    heads = re.findall(r"<th align=\"(right|left)\"[^>]*>(.*?)</th>", page)  # a header aligned with its column
    assert heads == [("left", "Op Name"), *[("right", c) for c in df.columns[1:]]]


def test_repeated_column_names_are_rendered_by_position():
    df = pd.DataFrame([[1.0, 2000.0, 3.0]], columns=["Reduce Start(us)", "Reduce Duration(us)", "Reduce Start(us)"])
    assert [t for _, t in cells(H.table_html(df))[0]] == ["1.000", "2,000.000", "3.000"]
