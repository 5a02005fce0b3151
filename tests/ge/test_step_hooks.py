"""ge.session.step_hooks: callbacks around every step; ge.session.last_graph()."""

import pytest

from geprof_nb import ge
from geprof_nb.ge.session import StepHooks, last_graph, step_hooks


class Recorder:
    def __init__(self, name, log, fail_before=False, fail_after=False):
        self.name, self.log, self.fail_before, self.fail_after = name, log, fail_before, fail_after

    def before_step(self, info):
        self.log.append((self.name, "before", info.api))
        if self.fail_before:
            raise RuntimeError(f"{self.name} before")

    def after_step(self, info):
        self.log.append((self.name, "after", info.api, info.ran, type(info.error).__name__ if info.error else None))
        if self.fail_after:
            raise RuntimeError(f"{self.name} after")


@pytest.fixture
def virtual_clock():
    """Steps here run on the virtual clock, and the clock mode is left as it was found."""
    with ge.simulation_settings(clock_mode="virtual"):
        yield


@pytest.fixture
def hooks():
    added = []

    def add(hook):
        step_hooks.add(hook)
        added.append(hook)

    yield add
    for h in added:
        step_hooks.remove(h)
    assert step_hooks.hooks == ()


@pytest.fixture
def sess(virtual_clock):
    s = ge.Session()
    s.add_graph(1, ge.models.mlp(batch_size=4, world_size=1))
    return s


def test_no_hooks_is_the_default():
    assert step_hooks.hooks == () and len(step_hooks) == 0


def test_hooks_run_around_every_kind_of_step_in_order(hooks, sess):
    log = []
    hooks(Recorder("a", log))
    hooks(Recorder("b", log))
    assert sess.run_graph(1) == ge.SUCCESS
    called = []
    assert sess.run_graph_async(1, callback=lambda status, out: called.append(list(log))) == ge.SUCCESS
    model, _ = ge.aclgrphBuildModel(ge.models.mlp(batch_size=4, world_size=1))
    model_id, _ = ge.acl.aclmdlLoadFromMem(model)
    assert ge.acl.aclmdlExecute(model_id) == 0
    assert sess.run_graph(7) != ge.SUCCESS  # not added: the hooks see a step that did not run
    assert log == [
        ("a", "before", "RunGraph"), ("b", "before", "RunGraph"),
        ("b", "after", "RunGraph", True, None), ("a", "after", "RunGraph", True, None),
        ("a", "before", "RunGraphAsync"), ("b", "before", "RunGraphAsync"),
        ("b", "after", "RunGraphAsync", True, None), ("a", "after", "RunGraphAsync", True, None),
        ("a", "before", "aclmdlExecute"), ("b", "before", "aclmdlExecute"),
        ("b", "after", "aclmdlExecute", True, None), ("a", "after", "aclmdlExecute", True, None),
        ("a", "before", "RunGraph"), ("b", "before", "RunGraph"),
        ("b", "after", "RunGraph", False, None), ("a", "after", "RunGraph", False, None),
    ]
    assert len(called[0]) == 8  # the async callback runs after the step's hooks
    assert sess.model(1).iterations == 2


def test_a_failing_before_hook_stops_the_step_and_unwinds_the_entered_hooks(hooks, sess):
    log = []
    hooks(Recorder("a", log))
    hooks(Recorder("b", log, fail_before=True))
    hooks(Recorder("c", log))
    with pytest.raises(RuntimeError, match="b before"):
        sess.run_graph(1)
    assert log == [("a", "before", "RunGraph"), ("b", "before", "RunGraph"),
                   ("a", "after", "RunGraph", False, "RuntimeError")]
    assert sess.model(1) is None or sess.model(1).iterations == 0


def test_every_after_hook_runs_and_the_first_error_propagates(hooks, sess):
    log = []
    hooks(Recorder("a", log, fail_after=True))
    hooks(Recorder("b", log, fail_after=True))
    with pytest.raises(RuntimeError, match="b after"):
        sess.run_graph(1)
    assert [e[:2] for e in log] == [("a", "before"), ("b", "before"), ("b", "after"), ("a", "after")]
    assert sess.model(1).iterations == 1


def test_an_error_in_the_step_reaches_the_after_hooks():
    log = []
    h = StepHooks()
    h.add(Recorder("a", log))

    def boom():
        raise ValueError("in the step")

    with pytest.raises(ValueError):
        h.run("X", boom)
    assert log[-1] == ("a", "after", "X", False, "ValueError")
    h.remove(log and h.hooks[0])
    assert h.hooks == ()


def test_last_graph_is_the_most_recently_added():
    s = ge.Session()
    g1, g2 = ge.models.mlp(batch_size=4), ge.models.mlp(batch_size=2)
    s.add_graph(1, g1)
    assert last_graph() is g1
    s.add_graph(2, g2)
    assert last_graph() is g2
    assert s.add_graph(2, g1) != ge.SUCCESS  # a failed add_graph changes nothing
    assert last_graph() is g2


def test_simulation_settings_device_applies_to_a_ge_initialised_inside():
    from geprof_nb.ge.session import device_runtime

    with ge.simulation_settings(device="Ascend910A"):
        assert ge.GEInitialize({"geprof.device": "Ascend910B"}) == ge.SUCCESS  # the override wins
        assert device_runtime().preset.name == "Ascend910A"
    with ge.simulation_settings(device="Ascend910A"):  # the same device: fine
        pass
    with pytest.raises(ValueError, match="already initialised on Ascend910A"):
        with ge.simulation_settings(device="Ascend910B"):
            pass
    with pytest.raises(ValueError, match="accepted: Ascend910B, Ascend910A"):
        with ge.simulation_settings(device="Ascend999"):
            pass
    ge.GEFinalize()
    assert ge.GEInitialize({}) == ge.SUCCESS and device_runtime().preset.name == "Ascend910B"


def test_ge_finalize_returns_the_clock_to_its_default():
    from geprof_nb.prof.clock import clock

    assert ge.GEInitialize({"geprof.clock": "virtual"}) == ge.SUCCESS and clock.mode == "virtual"
    ge.GEFinalize()
    assert clock.mode == "real"
    with ge.simulation_settings(clock_mode="virtual"):  # a %%geprof --clock in force is kept
        assert ge.GEInitialize({}) == ge.SUCCESS
        ge.GEFinalize()
        assert clock.mode == "virtual"
    assert clock.mode == "real"
