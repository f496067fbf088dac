"""The record: its fields defined once (dlbench.record.fields), built from events and samples made by hand
(dlbench.run.build_record), every figure checked against a value worked out here, and docs/record.md, the
Parquet columns and the tables' columns drawn from the one schema."""

import json

import pandas as pd
import pytest

from dlbench.aggregate import collect
from dlbench.analysis import frames
from dlbench.docgen import record_fields
from dlbench.record import fields
from dlbench.record.raw import Facts
from dlbench.run.build_record import build_record
from dlbench.run.measure import cap_suspected
from dlbench.study.point_facts import derive
from dlbench.study.sweep import one_point

T0 = 100.0  # the trainer's launch on the monotonic clock


def phase(name: str, start: float, end: float) -> list[dict]:
    return [{"e": "phase_start", "t": start, "name": name}, {"e": "phase_end", "t": end, "name": name}]


INFO = {"framework": "pytorch", "framework_version": "2.5.1", "numpy_version": "2.1.3", "python_version": "3.11.9",
        "cuda_version": None, "cudnn_version": None, "blas": "mkl", "build": {"mkldnn": True},
        "threads_in_effect": 2, "interop_threads_in_effect": 1, "library_in_effect": "mkldnn", "device_name": "cpu",
        "compile_in_effect": "eager", "precision_in_effect": "float32 compute, float32 weights"}
RESULT = {"train_time_s": 4.0, "test_time_s": 0.5, "interval_test_time_s": 0.0, "augment_time_s": 0.0,
          "accuracy": 0.9, "test_loss": 0.3, "final_loss": 1.0, "iterations": 10, "epochs_trained": 10 / 45,
          "images_trained": 320, "throughput_img_s": 80.0, "test_throughput_img_s": 718.0, "train_samples": 1438,
          "test_samples": 359, "validation_samples": 0, "best_validation_iteration": None,
          "best_validation_accuracy": None, "stopped_early_at": None, "accuracy_at_best": None, "ema": None}


def events(status: str = "ok") -> list[dict]:
    """A point's events: import 1 s, data 0.5 s, build 0.2 s, compile 0.1 s, training from 102.4 to 106.4."""
    out = [{"e": "process_start", "t": 100.5}, *phase("import", 100.5, 101.5), *phase("data_load", 101.5, 102.0),
           {"e": "data", "t": 102.0, "digest": "d1g", "train_samples": 1438, "test_samples": 359},
           {"e": "plan", "t": 102.0, "total_iterations": 10},
           {"e": "info", "t": 102.1, **INFO}, *phase("build", 102.1, 102.3), *phase("compile", 102.3, 102.4),
           {"e": "phase_start", "t": 102.4, "name": "train"},
           {"e": "step", "t": 104.4, "iteration": 5, "loss": 2.0},
           {"e": "step", "t": 106.4, "iteration": 10, "loss": 1.0},
           {"e": "phase_end", "t": 106.4, "name": "train"}]
    if status == "ok":
        out += [{"e": "test", "t": 107.0, "iteration": 10, "accuracy": 0.9}, {"e": "result", "t": 107.0, **RESULT}]
    return out + [{"e": "status", "t": 107.1, "status": status, "reason": None if status == "ok" else "it broke"}]


def sample(t, cpu, rss, threads, other=None, load=None):
    return {"t": t, "cpu_pct": cpu, "rss_mb": rss, "threads": threads, "processes": 1, "host_cpu_other_pct": other,
            "host_load_1m": load}


# One reading in the import phase, three in training (102.4 to 106.4), one after it.
SAMPLES = [sample(101.0, 50.0, 100.0, 3), sample(103.0, 150.0, 300.0, 5, 10.0, 1.5),
           sample(104.0, 190.0, 400.0, 5, 40.0, 1.6), sample(105.0, 170.0, 350.0, 5, 50.0, 1.7),
           sample(107.0, 90.0, 420.0, 6)]


@pytest.fixture(scope="module")
def point():
    return one_point("pytorch", "caffe", iterations=10, batch_size=32, threads=2)


def record_of(point: dict, events: list[dict], samples: list[dict], facts: Facts) -> dict:
    """The record as the runner builds it: the point's derived facts computed once, beside it."""
    return build_record(point, derive(point), events, samples, facts)


def facts(**kw) -> Facts:
    return Facts(**{"t_launch": T0, "t_end": 108.0, "returncode": 0, "machine": {"host": "h", "cpu_model": "m"},
                    "attempt": {"attempt": 1, "env_name": "pytorch"}, **kw})


def test_a_record_from_hand_made_events_has_the_figures_worked_out_by_hand(point):
    r = record_of(point, events(), SAMPLES, facts())
    assert r["status"] == "ok" and r["reason"] is None and r["machine_failure"] is False
    assert (r["id"], r["framework"], r["batch_size"], r["threads_requested"]) == (point["id"], "pytorch", 32, 2)
    # phases: import 100.5-101.5, data_load 101.5-102.0, build 102.1-102.3, compile 102.3-102.4
    assert r["import_time_s"] == pytest.approx(1.0) and r["data_load_time_s"] == pytest.approx(0.5)
    assert r["build_time_s"] == pytest.approx(0.2) and r["compile_time_s"] == pytest.approx(0.1)
    assert r["startup_time_s"] == pytest.approx(0.5)  # launch at 100, the first event at 100.5
    assert r["wall_time_s"] == pytest.approx(8.0)
    assert (r["train_time_s"], r["accuracy"], r["throughput_img_s"], r["iterations"]) == (4.0, 0.9, 80.0, 10)
    assert r["iterations_planned"] == 10 and r["iterations_done"] == 10 and r["diverged_at_iteration"] is None
    # LeNet on 1x28x28: conv 20x1x5x5+20, conv 50x20x5x5+50, dense 800x500+500, dense 500x10+10
    assert r["params"] == 520 + 25_050 + 400_500 + 5_010
    assert r["achieved_gflops"] == pytest.approx(80.0 * r["flops_per_image_train"] / 1e9)
    # the monitor: three readings in training (150, 190, 170 %; the first left out of the mean), five in all
    assert r["cpu_util_mean_pct"] == pytest.approx(180.0) and r["cpu_util_peak_pct"] == 190.0
    assert r["rss_peak_mb"] == 420.0 and r["rss_mean_mb"] == pytest.approx(350.0)
    assert r["threads_peak"] == 6 and r["samples"] == 5
    # others' CPU weighted by the time each training reading covers: (10 x 2 + 40 x 1 + 50 x 1) / 4 = 27.5
    assert r["host_cpu_other_pct_mean"] == pytest.approx(27.5) and r["host_load_start"] == 1.5
    assert r["contended"] is True  # over the default 25 % of a core
    # the trainer's word, each in its field
    assert (r["framework_version"], r["framework_numpy_version"], r["framework_python_version"]) == (
        "2.5.1", "2.1.3", "3.11.9")
    assert r["threads_in_effect"] == 2 and r["library_in_effect"] == "mkldnn" and r["compile"] == "eager"
    assert json.loads(r["build_json"]) == {"mkldnn": True} and r["dataset_digest"] == "d1g"
    assert r["host"] == "h" and r["attempt"] == 1 and r["paused_s"] == 0.0 and "log_tail" not in r
    assert "gpu_util_mean_pct" not in r  # no GPU reading, no GPU fields


def test_the_record_holds_the_schemas_fields_only_each_of_its_type(point):
    r = record_of(point, events(), SAMPLES, facts())
    assert fields.problems(r) == []
    always = {f.name for s in fields.SECTIONS if s.title != "The study" for f in s.fields if not f.where}
    # the runner's attempt fields come from the runner, attempt_id and files from dlbench.record.store.publish
    added_later = {"started_at", "monitor_interval_s", "lock_wait_s", "quiet_wait_s", "env_kind", "env_key",
                   "env_python", "dataset_dir", "dataset_source", "dataset_test_copy", "lost_attempts",
                   "slurm_restart_count", "attempt_id", "files", "cpu_bf16", "cpu_cores_logical",
                   "cpu_cores_physical", "cpu_cores_usable", "cpu_governor", "cpu_boost", "memory_total_mb", "os",
                   "python_runner", "gpu_model", "gpu_count", "gpu_driver", "gpu_state", "slurm_job_id",
                   "dlbench_version", "dlbench_commit", "dlbench_dirty"}
    assert always - set(r) == added_later
    assert fields.problems({**r, "threads_in_efect": 2}) == ["threads_in_efect: no field of the record"]
    assert fields.problems({**r, "batch_size": "32"}) == ["batch_size: str '32', not integer"]


@pytest.mark.parametrize("kw,status,oom_by", [
    ({"ended": "timeout"}, "timeout", None),
    ({"ended": "cancelled"}, "cancelled", None),
    ({"pauses": (40.0,)}, "suspended", None),
    ({"over_memory": True, "memory_limit_mb": 300.0}, "oom", "monitor"),
    ({"capped": True, "memory_limit_mb": 300.0}, "oom", "cap"),
    ({"lock_intact": False}, "lock_lost", None),
])
def test_how_the_runner_ended_a_point_decides_its_status(point, kw, status, oom_by):
    r = record_of(point, events("error"), SAMPLES, facts(**kw))
    assert r["status"] == status and r["oom_by"] == oom_by
    assert r["machine_failure"] is (status in ("lock_lost", "suspended"))
    assert r["final_loss"] == 1.0 and r["iterations_done"] == 10  # the last step's, as far as it got


def test_a_trainer_that_died_without_a_word():
    point = one_point("pytorch", "caffe", iterations=10)
    killed = record_of(point, [{"e": "process_start", "t": 100.2}], [], facts(returncode=-9, log_tail="Killed"))
    assert killed["status"] == "killed" and killed["reason"] == "the trainer was killed by SIGKILL"
    assert killed["log_tail"].endswith("Killed") and killed["iterations_done"] == 0 and killed["samples"] == 0
    # the same SIGKILL, counted by the trainer's memory cgroup as an OOM kill (dlbench.node.oomkill): its reason stands
    oom = record_of(point, [{"e": "process_start", "t": 100.2}], [], facts(returncode=-9, oom_killed="over 200 MB"))
    assert (oom["status"], oom["reason"], oom["oom_by"]) == ("oom", "over 200 MB", "cgroup")
    unstarted = record_of(point, [], [], facts(returncode=1))
    assert unstarted["status"] == "env_damaged" and unstarted["startup_time_s"] == pytest.approx(8.0)
    stuck = record_of(point, events("error"), [], facts(ended="hung", hang_s=60.0, unreaped=4242))
    assert stuck["status"] == "hung" and "no event from the trainer for 60 s" in stuck["reason"]
    assert "(pid 4242) did not exit within 30 s of SIGKILL" in stuck["reason"]


def test_the_cap_is_only_suspected_of_points_that_did_not_finish_well():
    assert cap_suspected(events("error"), 300.0, over_memory=False)
    assert not cap_suspected(events("ok"), 300.0, over_memory=False)  # an allocator's warning says nothing
    assert not cap_suspected(events("error"), None, over_memory=False)  # no budget, no cap
    assert not cap_suspected(events("error"), 300.0, over_memory=True)  # the monitor ended it


def test_gpu_energy_from_the_counter_interpolated_at_the_train_phase(point):
    gpu = [{**s, "gpu_util_pct": u, "gpu_mem_mb": m, "gpu_power_w": 75.0, "gpu_energy_j": j}
           for s, u, m, j in zip(SAMPLES[:4] + [sample(106.0, 90.0, 420.0, 6), sample(107.0, 90.0, 420.0, 6)],
                                 (0, 60, 80, 70, 90, 10), (500, 900, 1000, 950, 990, 600),
                                 (1000.0, 1050.0, 1100.0, 1200.0, 1300.0, 1350.0))]
    r = record_of(point, events(), gpu, facts(gpu_idle={"gpu_mem_idle_mb": 500.0, "gpu_power_idle_w": 50.0}))
    # the counter at 102.4 (between 101 and 103): 1000 + 50 x 1.4 / 2 = 1035; at 106.4: 1300 + 50 x 0.4 = 1320
    assert r["gpu_energy_train_j"] == pytest.approx(285.0) and r["gpu_energy_source"] == "counter"
    assert r["gpu_energy_train_above_idle_j"] == pytest.approx(285.0 - 50.0 * 4.0)
    assert r["gpu_mem_peak_mb"] == 1000 and r["gpu_mem_peak_above_idle_mb"] == pytest.approx(500.0)
    assert r["gpu_util_mean_pct"] == pytest.approx((60 + 80 + 70 + 90) / 4)  # the readings of the train phase


def test_an_adapters_info_is_checked_against_the_record():
    assert fields.check_info(INFO) is INFO
    with pytest.raises(fields.InfoError, match="'threads_in_efect' is no field of the record"):
        fields.check_info({**INFO, "threads_in_efect": 2})
    with pytest.raises(fields.InfoError, match="'threads_in_effect' is str '2', the record wants integer"):
        fields.check_info({**INFO, "threads_in_effect": "2"})
    with pytest.raises(fields.InfoError, match="'build' is str"):
        fields.check_info({**INFO, "build": "mkldnn"})


def test_the_record_page_lists_the_schemas_fields():
    assert record_fields.main(["--check"]) == 0, "run `dlbench docs`"
    rows = [line for line in record_fields.PAGE.read_text().splitlines() if line.startswith("| `")]
    assert [row.split("`")[1] for row in rows] == list(fields.FIELDS)
    assert "| `rss_peak_mb` | number | MiB | the highest resident memory read |" in rows
    assert "| `throughput_img_s` | number | images/s |" in next(r for r in rows if "`throughput_img_s`" in r)
    assert "| `reason` | text | - | why it failed, in one line (points that did not end ok only) |" in rows
    headings = [line[3:] for line in record_fields.PAGE.read_text().splitlines() if line.startswith("## ")]
    assert headings == [s.title for s in fields.SECTIONS]


def test_an_edited_field_makes_the_record_page_stale(tmp_path, monkeypatch):
    out = tmp_path / "record.md"
    out.write_text("# x\n")
    assert record_fields.main(["--check", "--out", str(out)]) == 1
    assert record_fields.main(["--out", str(out)]) == 0 and record_fields.main(["--check", "--out", str(out)]) == 0
    # a field dropped from the schema: the page still lists it
    sections = tuple(fields.Section(s.title, s.source, s.fields[:-1]) for s in fields.SECTIONS)
    monkeypatch.setattr(fields, "SECTIONS", sections)
    assert record_fields.main(["--check", "--out", str(out)]) == 1


def test_the_tables_read_columns_of_the_schema():
    columns = set(fields.COLUMNS)
    assert set(frames.RUN_COLUMNS) <= columns
    assert set(frames.HYPER_PARAMETERS + frames.RESOURCES) <= columns


def test_the_runs_table_has_the_schemas_order_and_keeps_what_it_does_not_know(point, tmp_path):
    record = record_of(point, events(), SAMPLES, facts())
    paths = []
    for i, extra in enumerate(({}, {"an_older_field": 1})):
        folder = tmp_path / f"p{i}"
        folder.mkdir()
        (folder / "metrics.json").write_text(json.dumps({**record, "id": f"p{i}", **extra}))
        paths.append(folder / "metrics.json")
    runs, _, _ = collect.collect(paths)
    order = [c for c in fields.COLUMNS if c in runs.columns]
    assert list(runs.columns) == [*order, "an_older_field"]
    assert list(runs["run_id"]) == ["p0", "p1"] and pd.isna(runs["an_older_field"][0])
