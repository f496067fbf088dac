"""The run step's two carried objects: the run options (dlbench.run.options) and a point's derived facts
(dlbench.study.point_facts)."""

import dataclasses

import pytest

from dlbench.frameworks import registry
from dlbench.run.options import HANG_S, RunOptions
from dlbench.spec import initial_weights, inputs, networks
from dlbench.study import identity, presets
from dlbench.study.point_facts import derive
from dlbench.study.sweep import one_point, point_id


def test_a_jobs_options_take_the_studys_settings_and_leave_a_none_to_the_default():
    study = {"interval_s": 0.5, "monitor": False, "time_limit_s": None, "memory_limit_mb": 900.0, "hang_s": None,
             "measure_lock": "/tmp/m.lock", "gpu_per_device": False, "lock_timeout_s": 30.0, "contended_pct": 40.0,
             "quiet_wait_s": 5.0}
    options = RunOptions.of_job(study, env={"python": "/envs/torch/bin/python", "kind": "cpu"}, attempt=2, retries=3)
    assert (options.interval_s, options.monitor, options.memory_limit_mb, options.measure_lock) == (
        0.5, False, 900.0, "/tmp/m.lock")
    assert options.time_limit_s is None and options.hang_s == HANG_S  # None: the runner's own default
    assert options.interpreter == "/envs/torch/bin/python" and options.env["kind"] == "cpu"
    assert (options.attempt, options.retries) == (2, 3)
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.attempt = 3
    with pytest.raises(TypeError, match="no interval"):
        RunOptions.of_job({"interval": 0.5})  # a misspelt setting fails, not silently ignored


def test_which_attempt_is_final_and_which_comes_after_the_last(monkeypatch):
    monkeypatch.delenv("SLURM_RESTART_COUNT", raising=False)
    assert RunOptions().final and not RunOptions().after_last  # no retries: the first attempt is the last
    assert not RunOptions(attempt=1, retries=1).final and RunOptions(attempt=2, retries=1).final
    assert RunOptions(attempt=3, retries=1).after_last and not RunOptions(attempt=2, retries=1).after_last
    monkeypatch.setenv("SLURM_RESTART_COUNT", "1")  # SLURM requeued the job once: that run counts too
    assert RunOptions(attempt=1, retries=1).final


@pytest.mark.parametrize("framework, preset, sweep", [
    ("pytorch", "caffe", {}), ("tensorflow", "own", {"iterations": 20}),
    ("jax", "caffe", {"iterations": 20, "compile": "eager"}),
])
def test_a_points_derived_facts_are_what_the_modules_say_and_leave_its_id_alone(framework, preset, sweep):
    point = one_point(framework, preset, **sweep)
    before = dict(point)
    facts = derive(point)
    shape = inputs.model_input_shape(point)
    assert facts.params == networks.param_count(point["layers"], shape) > 0
    assert facts.flops_per_image_train == networks.flops_per_image(point["layers"], shape)["train"] > 0
    assert facts.setting_id == identity.setting_id(point) and facts.cross_apply == presets.reading(point)
    assert facts.init == initial_weights.describe(point.get("init"))
    assert facts.compile == registry.get(framework).in_effect("compile", point)
    assert point == before and point_id({k: v for k, v in point.items() if k != "id"}) == point["id"]
    assert set(facts.fields()) == {f.name for f in dataclasses.fields(facts)}
