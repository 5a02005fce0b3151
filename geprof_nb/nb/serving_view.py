"""The explorer's Serving tab, for a run of ``ge.serve``: what a serving engineer reads first.

The latency percentiles (TTFT, TPOT, end-to-end: p50 / p90 / p99) and the throughput figures of
``Profile.serving_summary``, the engine steps over time (batch, KV-cache blocks in use, step time:
:func:`.plots.serving_steps_chart`), and the slowest requests of ``Profile.serving_requests``.  The tables
are the Profile's own figures, only laid out for reading (times since the first arrival, not since the epoch).
"""

from __future__ import annotations

import pandas as pd

from ..analysis import Profile
from ..analysis.tables.serving import PERCENTILES
from .html_parts import message_html, table_html
from .report import Chart, Report, draw

#: The slowest requests the tab lists (by end-to-end latency).
SLOWEST = 10
#: The latencies of the percentile table: serving_summary's prefix and the row's name.
LATENCIES = (("ttft", "TTFT"), ("tpot", "TPOT"), ("e2e", "end-to-end"))
#: The throughput figures of serving_summary the tab shows, and their names.
THROUGHPUT = (("output_tokens_per_s", "output tokens/s"), ("requests_per_s", "requests/s"),
              ("goodput_requests_per_s", "goodput (requests/s)"), ("slo_attainment", "SLO attainment"),
              ("preemptions", "preemptions"))
MSG_NO_SERVING = "No serving steps: the Serving tab shows a run of ge.serve (ge.serve(...) in a %%geprof cell)."


def percentiles(summary: pd.Series) -> pd.DataFrame:
    """``serving_summary``'s latency percentiles as a table: a row per latency, a column per percentile (ms)."""
    return pd.DataFrame([[name] + [summary.get(f"{key}_p{q}_ms") for q in PERCENTILES] for key, name in LATENCIES],
                        columns=["latency"] + [f"p{q} (ms)" for q in PERCENTILES])


def throughput(summary: pd.Series) -> pd.DataFrame:
    """``serving_summary``'s throughput, goodput and preemptions, one row each."""
    return pd.DataFrame([[name, summary.get(key)] for key, name in THROUGHPUT], columns=["figure", "value"])


def slowest_requests(requests: pd.DataFrame, n: int = SLOWEST) -> pd.DataFrame:
    """The ``n`` requests of the longest end-to-end latency, their arrival in ms since the first one."""
    first = requests["arrival_us"].min()
    out = requests.assign(arrival_ms=(requests["arrival_us"] - first) / 1e3)
    cols = ["request_id", "arrival_ms", "ttft_ms", "tpot_ms", "e2e_ms", "prompt_tokens", "output_tokens",
            "preemptions"]
    return out.sort_values("e2e_ms", ascending=False, kind="stable").head(n)[cols].reset_index(drop=True)


def steps_chart(report: Report) -> Chart:
    """The per-step chart, drawn once per Report."""
    steps = report.profile.serving_steps
    return Chart("serving_steps_chart", "plots.serving_steps_chart(profile.serving_steps)", lambda: report.picture(
        ("serving_steps_chart",), lambda: draw("serving_steps_chart", steps,
                                               alt="batch, KV-cache blocks in use and time per engine step")),
        "Serving")


def has_serving(profile: Profile) -> bool:
    """Whether ``profile`` is of a serving run (it has engine steps)."""
    return not profile.serving_steps.empty


def serving_blocks(report: Report) -> list:
    """The Serving tab's content."""
    p = report.profile
    if not has_serving(p):
        return [message_html(MSG_NO_SERVING)]
    requests = p.serving_requests
    summary = p.serving_summary()
    steps = p.serving_steps
    return [
        table_html(percentiles(summary), f"latency percentiles of {len(requests):,} requests (Profile.serving_summary)",
                   classes="geprof-serving-percentiles"),
        table_html(throughput(summary), "throughput from the first arrival to the last finish (goodput: the requests "
                                        "meeting Profile.serving_summary(ttft_slo_ms=..., tpot_slo_ms=...); none "
                                        "given here, so every request meets them)",
                   classes="geprof-serving-throughput"),
        steps_chart(report),
        table_html(slowest_requests(requests), f"slowest {min(SLOWEST, len(requests))} of {len(requests):,} requests "
                                               f"by end-to-end latency ({len(steps):,} engine steps)",
                   classes="geprof-serving-slowest"),
    ]
