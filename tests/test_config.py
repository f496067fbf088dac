"""Config validation: every mistake is one line that names the key and what is allowed."""

import pytest

from dlbench.study.config import ConfigError, validate

BASE = {"datasets": ["digits"], "frameworks": ["pytorch"], "preset": ["caffe"]}


def error_of(cfg, **kw) -> str:
    with pytest.raises(ConfigError) as info:
        validate(cfg, **kw)
    message = str(info.value)
    assert "\n" not in message
    return message


def test_defaults_are_filled_in():
    cfg = validate(BASE)
    assert cfg["repeats"] == 1 and cfg["seed"] == 1 and cfg["scale"] == 1
    assert cfg["monitor"]["interval_s"] == 0.2 and cfg["monitor"]["enabled"] is True
    assert cfg["measurement"]["exclusive"] is True
    assert cfg["limits"] == {"time_s": None, "memory_mb": None, "hang_s": 1800}


def test_unknown_top_level_key_is_named_with_the_allowed_ones():
    msg = error_of({**BASE, "batchsize": [64]})
    assert "'batchsize'" in msg and "datasets" in msg and "sweep" in msg


def test_unknown_sweep_axis():
    msg = error_of({**BASE, "sweep": {"batch": [64]}})
    assert "'batch'" in msg and "sweep" in msg and "batch_size" in msg


def test_wrong_type():
    msg = error_of({**BASE, "sweep": {"batch_size": ["big"]}})
    assert "sweep.batch_size.0" in msg and "integer" in msg


def test_unknown_framework_lists_the_known():
    msg = error_of({**BASE, "frameworks": ["mxnet"]})
    assert "'mxnet'" in msg and "pytorch" in msg and "caffe" in msg


def test_unknown_dataset():
    msg = error_of({**BASE, "datasets": ["imagenet"]})
    assert "'imagenet'" in msg and "cifar10" in msg


def test_unknown_preset():
    msg = error_of({**BASE, "preset": ["keras"]})
    assert "'keras'" in msg and "own" in msg and "torch" in msg


def test_empty_sweep_list():
    msg = error_of({**BASE, "sweep": {"learning_rate": []}})
    assert "sweep.learning_rate" in msg and "empty" in msg


def test_epochs_and_iterations_together():
    msg = error_of({**BASE, "sweep": {"epochs": [1], "iterations": [100]}})
    assert "epochs" in msg and "iterations" in msg


def test_threads_above_the_cores_of_a_local_run():
    msg = error_of({**BASE, "sweep": {"threads": [64]}}, local_cores=2)
    assert "sweep.threads" in msg and "64" in msg and "2 cores" in msg
    validate({**BASE, "sweep": {"threads": [64]}}, local_cores=None)  # a cluster may have them


def test_values_that_would_reach_a_shell_or_a_path_are_refused():
    for bad in ["../etc", "a;rm -rf", "has space", "quo'te"]:
        msg = error_of({**BASE, "preset": [bad]})
        assert "plain name" in msg
    msg = error_of({**BASE, "presets": {"../x": {"network": "lenet", "optimizer": "sgd",
                                                  "learning_rate": 0.1, "batch_size": 8, "epochs": 1}}})
    assert "../x" in msg


def test_custom_preset_is_accepted_and_checked():
    preset = {"network": "lenet", "optimizer": "sgd", "learning_rate": 0.1, "batch_size": 8, "epochs": 1}
    cfg = validate({**BASE, "preset": ["mine"], "presets": {"mine": preset}})
    assert cfg["presets"]["mine"]["network"] == "lenet"
    msg = error_of({**BASE, "preset": ["mine"], "presets": {"mine": {**preset, "network": "resnet"}}})
    assert "resnet" in msg and "lenet" in msg
    msg = error_of({**BASE, "preset": ["mine"], "presets": {"mine": {**preset, "iterations": 5}}})
    assert "either epochs or iterations" in msg


def test_a_custom_transformer_preset_takes_adamw_and_the_cosine_schedule():
    preset = {"network": "vit_mini", "optimizer": "adamw", "weight_decay": 0.05, "learning_rate": 5e-4,
              "batch_size": 64, "epochs": 1, "init": "vit",
              "lr_policy": {"name": "cosine", "warmup_epochs": 0.5, "warmup_lr": 1e-6, "min_lr": 1e-5}}
    cfg = validate({**BASE, "datasets": ["fashion_mnist"], "preset": ["mine"], "presets": {"mine": preset}})
    assert cfg["presets"]["mine"]["lr_policy"]["name"] == "cosine"
    assert cfg["presets"]["mine"]["optimizer"] == "adamw"
    msg = error_of({**BASE, "preset": ["mine"], "presets": {"mine": {**preset, "optimizer": "adamax"}}})
    assert "adamax" in msg and "adamw" in msg
    bad = {**preset, "lr_policy": {"name": "cosine", "warmup_steps": 5}}
    assert "warmup_steps" in error_of({**BASE, "preset": ["mine"], "presets": {"mine": bad}})


def test_missing_local_dataset_path():
    msg = error_of({**BASE, "data": {"mnist": "/nowhere/mnist"}})
    assert "data.mnist" in msg and "/nowhere/mnist" in msg


def test_out_of_range_values():
    assert "learning_rate" in error_of({**BASE, "sweep": {"learning_rate": [0]}})
    assert "scale" in error_of({**BASE, "scale": 2})
    assert "repeats" in error_of({**BASE, "repeats": 0})


def test_not_a_mapping():
    assert "not a mapping" in error_of(None)


def test_a_path_with_a_trailing_newline_is_refused_in_one_line():
    # `$` would match before the newline and let it split the rule's command line
    with pytest.raises(ConfigError, match=r"measurement.lock_file: '/tmp/x\\n' has a character that is not allowed"):
        validate({**BASE, "measurement": {"lock_file": "/tmp/x\n"}})


def test_a_gpu_model_the_slurm_plugin_refuses_is_refused_before_any_job():
    with pytest.raises(ConfigError, match="cluster.gpu_model: 'h100-80gb' is refused by the SLURM executor plugin"):
        validate({**BASE, "cluster": {"gpu_model": "h100-80gb"}})
    assert validate({**BASE, "cluster": {"gpu_model": "h100.80gb"}})["cluster"]["gpu_model"] == "h100.80gb"


def test_an_unknown_reading_is_refused_with_the_known_ones():
    msg = error_of({**BASE, "cross_apply": ["hyper"]})
    assert "cross_apply" in msg and "'hyper'" in msg and "settings" in msg and "preset" in msg
    msg = error_of({**BASE, "studies": {"cross": {"cross_apply": ["whole"]}}})
    assert "studies.cross.cross_apply" in msg and "'whole'" in msg


def test_the_reading_defaults_to_the_whole_preset():
    assert validate(BASE)["cross_apply"] == ["preset"]
    cfg = validate({**BASE, "studies": {"cross": {"preset": ["caffe"], "cross_apply": ["settings", "preset"]}}})
    assert cfg["studies"]["cross"]["cross_apply"] == ["settings", "preset"]


def test_a_tuning_grid_without_values_is_one_line():
    msg = error_of({**BASE, "studies": {"tuning": {"tune": {}}}})
    assert "studies.tuning.tune" in msg and "batch_size" in msg and "learning_rate" in msg and "length" in msg
    msg = error_of({**BASE, "studies": {"tuning": {"tune": {"batch_size": []}}}})
    assert "studies.tuning.tune.batch_size" in msg and "empty" in msg
    msg = error_of({**BASE, "tune": {"momentum": [1, 2]}})
    assert "'momentum'" in msg and "learning_rate" in msg
    msg = error_of({**BASE, "tune": {"learning_rate": [1, 0]}})
    assert "tune.learning_rate.1" in msg


def test_a_tuning_grid_holds_the_defaults_and_does_not_also_sweep_the_axis():
    msg = error_of({**BASE, "studies": {"tuning": {"tune": {"batch_size": [0.5, 2]}}}})
    assert "studies.tuning.tune.batch_size" in msg and "lacks 1" in msg
    msg = error_of({**BASE, "studies": {"tuning": {"tune": {"batch_size": [0.5, 1]},
                                                   "sweep": {"batch_size": [32]}}}})
    assert "studies.tuning" in msg and "both tuned" in msg and "sweep.batch_size" in msg
    msg = error_of({**BASE, "tune": {"length": [1, 2]}, "sweep": {"epochs": [3]}})
    assert msg.startswith("(top level)") and "sweep.epochs" in msg
    cfg = validate({**BASE, "sweep": {"iterations": [30]},
                    "studies": {"tuning": {"tune": {"batch_size": [0.5, 1], "length": [1, 2]}}}})
    assert cfg["studies"]["tuning"]["tune"]["length"] == [1, 2]  # a top-level length is tuned around, not refused


def test_interop_threads_are_tensorflows_alone():
    cfg = validate({**BASE, "frameworks": ["tensorflow"], "sweep": {"interop_threads": [1, 4]}})
    assert cfg["sweep"]["interop_threads"] == [1, 4]
    msg = error_of({**BASE, "frameworks": ["tensorflow", "pytorch"], "sweep": {"interop_threads": [2]}})
    assert msg.startswith("sweep.interop_threads: pytorch cannot honour 2") and "leave the key out" in msg
    msg = error_of({**BASE, "frameworks": ["tensorflow", "caffe"],
                    "studies": {"io": {"sweep": {"interop_threads": [2]}}}})
    assert msg.startswith("studies.io.sweep.interop_threads: caffe cannot honour 2") and "studies" in msg
    assert "sweep.interop_threads.0" in error_of({**BASE, "frameworks": ["tensorflow"],
                                                  "sweep": {"interop_threads": [0]}})


def test_a_library_a_framework_cannot_honour_names_framework_key_and_values():
    msg = error_of({**BASE, "frameworks": ["caffe"], "sweep": {"library": ["no_onednn"]}})
    assert msg.startswith("sweep.library: caffe cannot honour 'no_onednn' (it accepts: default, mkl)")


def test_a_custom_initialiser_must_fit_its_network():
    preset = {"network": "lenet", "optimizer": "sgd", "learning_rate": 0.1, "batch_size": 8, "epochs": 1,
              "init": {"name": "gaussian", "std": [0.1, 0.1]}}
    msg = error_of({**BASE, "preset": ["mine"], "presets": {"mine": preset}})
    assert "presets.mine" in msg and "2 values for 4" in msg and "lenet" in msg
    ok = dict(preset, init="torch", shuffle=False, ema_decay=0.99,
              validation={"fraction": 0.1, "patience": 100}, input={"standardize": "per_split", "skip_first": 0.1})
    validate({**BASE, "preset": ["mine"], "presets": {"mine": ok}})
    msg = error_of({**BASE, "preset": ["mine"], "presets": {"mine": dict(preset, init="kaiming")}})
    assert msg.startswith("presets.mine.init: 'kaiming' is not allowed") and "torch" in msg and "he" in msg
    msg = error_of({**BASE, "preset": ["mine"], "presets": {"mine": dict(preset, init={"name": "gaussian", "sd": 1})}})
    assert msg == "unknown key 'sd' in presets.mine.init (did you mean 'std'?); allowed keys: bias, bias_std, name, std"


def test_compile_and_precision_are_refused_in_one_line_where_a_framework_has_no_such_switch():
    modern = {**BASE, "frameworks": ["pytorch", "tensorflow", "jax"],
              "sweep": {"compile": ["eager", "compiled"], "precision": ["fp32", "bf16"]}}
    assert validate(modern)["sweep"]["compile"] == ["eager", "compiled"]
    msg = error_of({**BASE, "frameworks": ["pytorch", "caffe"], "sweep": {"compile": ["eager", "compiled"]}})
    assert msg == ("sweep.compile: caffe cannot honour 'eager' (it accepts: none; leave the key out for it); sweep it "
                   "in a sub-study (`studies:`) of the frameworks that accept it")
    msg = error_of({**BASE, "frameworks": ["theano"], "sweep": {"precision": ["fp32", "bf16"]}})
    assert msg.startswith("sweep.precision: theano cannot honour 'bf16' (it accepts: fp32, fp64)")
    validate({**BASE, "frameworks": ["theano", "caffe"], "sweep": {"precision": ["fp32"]}})  # what they always do
    assert error_of({**BASE, "sweep": {"precision": ["fp16"]}}).startswith("sweep.precision.0: 'fp16' is not allowed")
    assert "\n" not in msg


def test_memory_format_is_pytorchs_alone_and_refused_in_one_line_elsewhere():
    cfg = validate({**BASE, "sweep": {"memory_format": ["contiguous", "channels_last"]}})
    assert cfg["sweep"]["memory_format"] == ["contiguous", "channels_last"]
    msg = error_of({**BASE, "frameworks": ["pytorch", "tensorflow"], "sweep": {"memory_format": ["contiguous"]}})
    assert msg == ("sweep.memory_format: tensorflow cannot honour 'contiguous' (it accepts: none; leave the key out "
                   "for it); sweep it in a sub-study (`studies:`) of the frameworks that accept it")
    assert error_of({**BASE, "sweep": {"memory_format": ["nhwc"]}}).startswith(
        "sweep.memory_format.0: 'nhwc' is not allowed")


def test_fp64_is_an_axis_value_of_theano_pytorch_and_tensorflow_and_refused_in_one_line_elsewhere():
    cfg = validate({**BASE, "frameworks": ["theano", "pytorch", "tensorflow"], "sweep": {"precision": ["fp64"]}})
    assert cfg["sweep"]["precision"] == ["fp64"]
    for name in ("caffe", "jax"):
        msg = error_of({**BASE, "frameworks": ["pytorch", name], "sweep": {"precision": ["fp64"]}})
        assert msg.startswith(f"sweep.precision: {name} cannot honour 'fp64'") and "\n" not in msg


def test_a_test_copy_of_a_dataset_needs_its_folder(tmp_path):
    ok = validate({**BASE, "data": {"cifar10": str(tmp_path)}, "data_test_copy": {"cifar10": "a test set"}})
    assert ok["data_test_copy"] == {"cifar10": "a test set"}
    assert validate(BASE)["data_test_copy"] == {}  # without the key every copy is checked by its digest
    msg = error_of({**BASE, "data_test_copy": {"cifar10": "a test set"}})
    assert msg.startswith("data_test_copy.cifar10: no data.cifar10") and "\n" not in msg


def test_a_framework_without_own_defaults_for_a_dataset_is_refused_before_any_job():
    msg = error_of({"datasets": ["cifar10"], "frameworks": ["jax"]})
    assert msg.startswith("preset: jax's own preset (flax) has no settings for cifar10") and "\n" not in msg
    msg = error_of({"datasets": ["digits"], "frameworks": ["pytorch"], "studies": {
        "c": {"datasets": ["cifar10"], "preset": ["flax"]}}})
    assert msg.startswith("studies.c.preset: preset 'flax' has no settings for cifar10")
    validate({"datasets": ["cifar10"], "frameworks": ["pytorch"], "preset": ["caffe"]})
    # the settings reading keeps the framework's own network: JAX has none for cifar10
    msg = error_of({"datasets": ["cifar10"], "frameworks": ["jax"], "preset": ["caffe"], "cross_apply": ["settings"]})
    assert "jax's own preset (flax)" in msg
    validate({"datasets": ["cifar10"], "frameworks": ["jax"], "preset": ["caffe"]})  # the whole preset is enough


@pytest.mark.parametrize("text, where", [
    ("monitor: {interval_s: .nan}", "monitor.interval_s"),
    ("limits: {hang_s: .nan}", "limits.hang_s"),
    ("scale: .nan", "scale"),
    ("measurement: {lock_timeout_s: .inf}", "measurement.lock_timeout_s"),
    ("sweep: {learning_rate: [0.01, .nan]}", "sweep.learning_rate.1"),
    ("sweep: {learning_rate: [-.inf]}", "sweep.learning_rate.0"),
])
def test_nan_and_infinity_are_refused_where_every_bound_of_the_schema_would_pass_them(tmp_path, text, where):
    from dlbench.study import config

    path = tmp_path / "config.yaml"
    path.write_text("datasets: [digits]\nframeworks: [pytorch]\npreset: [caffe]\n" + text + "\n")
    with pytest.raises(ConfigError) as info:
        config.load(path)
    message = str(info.value)
    assert "\n" not in message and message.startswith(f"{where}: ") and "finite number" in message, message


def test_select_status_names_every_status_a_record_can_be_tabled_with():
    from dlbench.record import statuses

    for status in (*statuses.RETRIED, statuses.DAMAGED, "cancelled", "none"):
        assert validate({**BASE, "select": {"status": [status]}})["select"]["status"] == [status]
    msg = error_of({**BASE, "select": {"status": ["damged"]}})
    assert "select.status.0" in msg and "damaged" in msg and "lock_timeout" in msg


def test_a_record_that_cannot_be_read_or_whose_files_disagree_has_the_status_damaged(tmp_path):
    import json

    from dlbench.record import store

    assert store.status_in(tmp_path) is None
    (tmp_path / store.RESULT).write_bytes(b'{"id": "x", "framew')  # cut short
    assert store.status_in(tmp_path) == "damaged"
    (tmp_path / "curve.csv").write_text("iteration,loss\n1,2.0\n")
    record = {"id": "x", "framework": "pytorch", "dataset": "digits", "status": "ok",
              "files": {"curve.csv": {"bytes": 999, "sha256": "0" * 64}}}
    (tmp_path / store.RESULT).write_text(json.dumps(record))
    assert store.status_in(tmp_path) == "damaged"  # curve.csv is not the file the record names
    record["files"]["curve.csv"]["bytes"] = (tmp_path / "curve.csv").stat().st_size
    (tmp_path / store.RESULT).write_text(json.dumps(record))
    assert store.status_in(tmp_path) == "ok"


def test_every_schema_error_is_said_at_once_with_a_suggestion_for_a_near_miss():
    with pytest.raises(ConfigError) as info:
        validate({**BASE, "frameworks": ["tensorflw"], "sweep": {"batchsize": [3]}, "repeats": 0})
    lines = str(info.value).splitlines()
    assert len(lines) == 3, lines
    assert any("frameworks.0" in ln and "did you mean 'tensorflow'?" in ln for ln in lines), lines
    assert any("'batchsize'" in ln and "did you mean 'batch_size'?" in ln for ln in lines), lines
    assert any(ln.startswith("repeats: 0 is out of range") for ln in lines), lines
    assert info.value.said().splitlines() == [f"dlbench: config error: {ln}" for ln in lines]
    # no suggestion where nothing is near
    assert "did you mean" not in error_of({**BASE, "frameworks": ["mxnet"]})


@pytest.mark.parametrize("text, says", [
    ("datasets: [digits\n", "line 2, column 1: did not find expected ',' or ']' (while parsing a flow sequence at "
                            "line 1, column 11)"),
    ("? [a, b]\n: 1\ndatasets: [digits]\n", "line 1, column 3: a key that is a list"),
])
def test_a_yaml_mistake_is_one_line_with_its_line_and_column(tmp_path, text, says):
    from dlbench.study import config

    path = tmp_path / "config.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        config.load(path)
    assert "\n" not in str(info.value) and says in str(info.value), str(info.value)
