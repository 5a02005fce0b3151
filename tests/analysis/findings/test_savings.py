"""savings: a finding's change re-timed on the critical path as ``Profile.what_if`` would, one lookup per op name."""

from __future__ import annotations

from fnmatch import fnmatchcase

import numpy as np
import pytest

from geprof_nb.analysis.findings.savings import StepSavings, chained, change_of, literal, what_if_stakes
from geprof_nb.analysis.timing.what_if import WhatIfChange, new_durations


@pytest.mark.parametrize("name", ["fc0", "layer[1]/conv*", "a?b", "x[[]y"])
def test_a_literal_pattern_matches_exactly_its_name(name):
    pattern = literal(name)
    assert fnmatchcase(name, pattern)
    assert not any(fnmatchcase(other, pattern) for other in (name + "x", "x" + name, name.replace(name[-1], "_")))


def test_durations_are_what_ifs_own(resnet_run):
    """The per-name lookup gives every task the duration what_if's fnmatch pass gives it (names and a wildcard)."""
    p = resnet_run.profile
    savings = StepSavings(p, [1, 2, 3])
    names = [str(n) for n in p.op_summary["Op Name"].unique()[:200]]
    change = WhatIfChange((*((literal(n), 1.0 + i / 100) for i, n in enumerate(names[:150])), ("Conv2D*", 2.0)),
                          tuple(literal(n) for n in names[150:]))
    assert np.array_equal(savings.durations([change]), new_durations(change, savings.tasks, {}))
    assert savings.durations([change_of(remove_ops=["no such op"])]) is None  # what_if refuses it: no saving
    # several changes at once: as one change with the factors of a pattern multiplied
    first = names[0]
    a, b = change_of({first: 2.0}, ["Relu"]), change_of({first: 1.5, "Conv2D": 3.0}, host_gap_us=0.0)
    both = WhatIfChange(((literal(first), 3.0), ("Conv2D", 3.0)), ("Relu",))
    assert np.array_equal(savings.durations([a, b]), new_durations(both, savings.tasks, {}))


def test_chained_savings_add_up_to_all_changes_at_once(resnet_run):
    p = resnet_run.profile
    comm = p.op_summary.loc[p.op_summary["OP Type"].astype(str).str.startswith("Hcom"), "Op Name"].unique()
    changes = [change_of({"Conv2D": 2.0}), change_of(remove_ops=comm), None, change_of(remove_ops=["no such op"])]
    alone, exclusive = what_if_stakes(p, [1, 2, 3], changes)
    assert alone[2:] == [None, None] and exclusive[2:] == [None, None]  # no change, or one matching nothing
    predicted = p.what_if(op_speedup={"Conv2D": 2.0}, remove_ops=list(comm)).predicted
    together = float((predicted["now_ns"] - predicted["predicted_ns"]).mean()) / 1000
    assert sum(exclusive[:2]) == pytest.approx(together, abs=1e-6)
    first = int(np.argmax(alone[:2]))
    assert exclusive[first] == alone[first]  # the largest saving keeps its own figure
    savings = StepSavings(p, [1, 2, 3])
    assert chained(savings, changes[:2], alone[:2]) == exclusive[:2]


@pytest.mark.slow
def test_the_time_at_stake_is_what_the_re_simulated_change_saves(resnet_run):
    """Each what-if finding's change, re-run on the simulator (``verify``: the model again, its ops sped up or
    removed), saves per step what the finding puts at stake, to a nanosecond a step."""
    advice = resnet_run.profile.advise()
    checked = 0
    for (_, row), keywords in zip(advice.iterrows(), advice.attrs["what_if"]):
        if keywords is None:
            continue
        w = resnet_run.profile.what_if(**keywords)
        v = w.verify()
        now = w.predicted.set_index("iteration").loc[v["iteration"], "now_ns"].to_numpy()
        assert float((now - v["simulated_ns"]).mean()) / 1000 == pytest.approx(row["Time at stake (us)"], abs=1e-3)
        checked += 1
    assert checked == 3  # the exposed AllReduce, the tiny kernels and the memory-bound ops
