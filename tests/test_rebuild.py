"""The raw measurement kept apart from the record (dlbench.record.raw), the record made from it (dlbench.run.derive)
and made again by the record rule (dlbench.run.rebuild) where the code that makes records or the measurement
changed; and points an earlier dlbench recorded, given their raw measurement (dlbench.run.earlier_layout)."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import pytest

from dlbench.frameworks import protocol
from dlbench.record import raw, store
from dlbench.run import build_record, derive, earlier_layout, rebuild
from dlbench.study.point_facts import derive as point_facts
from dlbench.study.sweep import one_point

T0 = 100.0


def phase(name, start, end):
    return [{"e": "phase_start", "t": start, "name": name}, {"e": "phase_end", "t": end, "name": name}]


def events(status="ok", loss=1.0):
    out = [{"e": "process_start", "t": 100.5}, *phase("import", 100.5, 101.5), *phase("data_load", 101.5, 102.0),
           {"e": "data", "t": 102.0, "digest": "d1g", "train_samples": 1438, "test_samples": 359},
           {"e": "plan", "t": 102.0, "total_iterations": 10},
           {"e": "info", "t": 102.1, "framework": "pytorch", "framework_version": "2.5.1", "threads_in_effect": 1},
           *phase("build", 102.1, 102.3), {"e": "phase_start", "t": 102.4, "name": "train"},
           {"e": "step", "t": 104.4, "iteration": 5, "loss": 2.0},
           {"e": "step", "t": 106.4, "iteration": 10, "loss": loss}, {"e": "phase_end", "t": 106.4, "name": "train"}]
    if status == "ok":
        out += [{"e": "test", "t": 107.0, "iteration": 10, "accuracy": 0.9},
                {"e": "result", "t": 107.0, "train_time_s": 4.0, "accuracy": 0.9, "iterations": 10,
                 "throughput_img_s": 80.0}]
    return out + [{"e": "status", "t": 107.1, "status": status, "reason": None if status == "ok" else "it broke"}]


def samples(gpu=False):
    rows = []
    for i, t in enumerate((101.0, 103.0, 104.0, 105.0, 107.0)):
        row = {"t": t, "cpu_pct": 50.0 + 10 * i, "rss_mb": 100.0 + 50 * i, "threads": 3 + i, "processes": 1,
               "host_cpu_other_pct": 10.0 * i if i else None, "host_load_1m": 1.5}
        if gpu:
            row.update(gpu_util_pct=10 * i, gpu_mem_mb=500.0 + i, gpu_power_w=70.0, gpu_energy_j=1000.0 + 50 * i)
        rows.append(row)
    return rows


def facts(**kw) -> raw.Facts:
    return raw.Facts(**{"t_launch": T0, "t_end": 108.0, "wall": 1.9e9, "returncode": 0,
                        "machine": {"host": "h", "cpu_model": "m", "dlbench_commit": "abc"},
                        "attempt": {"attempt": 1, "env_name": "pytorch", "started_at": "2030-03-17T12:00:00"},
                        **kw})


@pytest.fixture(scope="module")
def point():
    return one_point("pytorch", "caffe", iterations=10, batch_size=32, threads=1)


def measured(folder: Path, point: dict, evs: list[dict], f: raw.Facts, rows=None, log="a line\n") -> Path:
    """A raw measurement written as the runner writes it."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / raw.POINT).write_text(json.dumps(point))
    (folder / raw.EVENTS).write_text("".join(protocol.encode(e["e"], e["t"], {k: v for k, v in e.items()
                                                                                if k not in ("e", "t")}) + "\n"
                                             for e in evs))
    (folder / raw.LOG).write_text(log)
    raw.write(folder, f, samples() if rows is None else rows)
    return folder


def test_the_record_made_from_a_raw_measurement_is_build_records_own(point, tmp_path):
    """What measurement.json keeps is what build_record is given: the record from disk is the record from memory
    (the log's tail read back from trainer.log), a diverged loss read back as inf."""
    f = facts(ended="timeout", pauses=(), monitor_died=(105.5, "OSError: gone"), lock_intact=True)
    folder = measured(tmp_path / "p", point, events("error", loss=float("inf")), f, log="one\ntwo\n")
    made = derive.record_of(folder)
    f.log_tail = "one\ntwo"
    assert made.record == {**build_record.build_record(point, point_facts(point), events("error", loss=float("inf")),
                                                       samples(), f), "attempt_id": made.record["attempt_id"]}
    assert made.record["status"] == "timeout" and made.record["final_loss"] == math.inf
    assert made.record["monitor_died"].startswith("5.5 s after launch (OSError: gone)")
    assert set(made.raw_files) == set(raw.FILES) and made.wall == 1.9e9


def test_build_record_reads_no_module_state(point, monkeypatch):
    """A preempted job's refused requeue reaches the record through the runner's facts, not slurm_job's memory."""
    from dlbench.node import slurm_job

    monkeypatch.setattr(slurm_job, "_answered", {"preempted": True, "refused": "JobRequeue=0"})
    r = build_record.build_record(point, point_facts(point), events("error"), samples(), facts(ended="preempted"))
    assert r["reason"] == "SLURM preempted the job before the point finished; the job requeued itself"
    r = build_record.build_record(point, point_facts(point), events("error"), samples(),
                                  facts(ended="preempted", requeue_refused="JobRequeue=0"))
    assert "refused to requeue it (scontrol: JobRequeue=0)" in r["reason"]


def test_a_measurement_whose_files_disagree_makes_no_record(point, tmp_path):
    folder = measured(tmp_path / "p", point, events(), facts())
    assert raw.whole(folder)
    (folder / raw.EVENTS).write_text((folder / raw.EVENTS).read_text() + '{"e": "step"}\n')
    assert not raw.whole(folder)
    with pytest.raises(raw.NotWhole, match="events.jsonl has"):
        derive.record_of(folder)


def study(tmp_path: Path, point: dict, n: int = 3) -> list[Path]:
    """n points' raw measurements, each with the record a training job left beside it."""
    folders = []
    for i in range(n):
        p = {**point, "id": f"{point['id']}-{i}", "seed": i}
        folder = measured(tmp_path / "runs" / p["id"], p, events(), facts())
        made = derive.record_of(folder)
        store.publish(folder, folder, made.record, made.tables, "attempt", raw_files=made.raw_files)
        folders.append(folder)
    return folders


def test_the_record_rule_makes_again_only_what_changed(point, tmp_path):
    folders = study(tmp_path, point)
    index = tmp_path / "records.json"
    first = rebuild.rebuild(folders, index, "code-1")
    assert (first.made, first.written) == (3, 0)  # made again: the same record the training job left
    assert rebuild.records_in(index) == [str(f / store.RESULT) for f in folders]
    assert rebuild.rebuild(folders, index, "code-1").made == 0  # nothing changed: two stats a point
    # one point measured again: its record only
    again = measured(folders[1], json.loads((folders[1] / raw.POINT).read_text()), events(), facts(t_end=109.0))
    counts = rebuild.rebuild(folders, index, "code-1")
    assert (counts.made, counts.written) == (1, 1)
    assert store.read(again / store.RESULT)["wall_time_s"] == pytest.approx(9.0)
    # the code that makes records changed: every record made again (written where it came out other)
    assert (rebuild.rebuild(folders, index, "code-2").made, rebuild.rebuild(folders, index, "code-2").made) == (3, 0)
    # a record deleted by hand is made again at the rule's next run
    (folders[0] / store.RESULT).unlink()
    assert rebuild.rebuild(folders, index, "code-2").made == 1 and (folders[0] / store.RESULT).exists()


def test_a_measurement_not_whole_is_said_and_the_study_goes_on(point, tmp_path):
    folders = study(tmp_path, point)
    (folders[2] / raw.MONITOR).write_text("")
    said = []
    counts = rebuild.rebuild(folders, tmp_path / "records.json", "code", say=said.append)
    assert (counts.made, counts.not_whole) == (2, 1) and len(said) == 1 and "--forcerun" in said[0]
    # listed still: the aggregation tables what stands; looked at again at the rule's next run
    assert str(folders[2] / store.RESULT) in rebuild.records_in(tmp_path / "records.json")
    assert rebuild.rebuild(folders, tmp_path / "records.json", "code", say=said.append).not_whole == 1


def test_a_record_made_again_replaces_the_old_whole_or_not_at_all(point, tmp_path, monkeypatch):
    """A failure while the new tables are written (a full disk) leaves the record and tables that were there."""
    (folder,) = study(tmp_path, point, 1)
    before = {name: (folder / name).read_bytes() for name in (store.RESULT, *store.TABLES)}
    measured(folder, json.loads((folder / raw.POINT).read_text()), events(), facts(t_end=110.0))
    made = derive.record_of(folder)
    real, calls = store.fsync_file, []

    def full(path):
        calls.append(path)
        if len(calls) == 2:  # the second table cannot be made durable: the disk is full
            raise OSError(28, "No space left on device")
        real(path)

    monkeypatch.setattr(store, "fsync_file", full)
    with pytest.raises(OSError):
        store.rewrite(folder, made.record, made.tables, made.raw_files)
    assert {name: (folder / name).read_bytes() for name in before} == before
    assert not list(folder.glob(".rebuilt-*"))
    monkeypatch.setattr(store, "fsync_file", real)
    assert store.rewrite(folder, made.record, made.tables, made.raw_files)
    record = store.read(folder / store.RESULT)
    assert record["wall_time_s"] == pytest.approx(10.0) and store.disagreement(folder / store.RESULT, record) is None


# ------------------------------------------------------------------------------------------ an earlier layout

def earlier(folder: Path, point: dict, evs: list[dict], f: raw.Facts, rows: list[dict], log: str = "") -> dict:
    """A point folder as an earlier dlbench left it: the record it made (the train rule's output then), its tables,
    the events, log and point, and no raw measurement apart."""
    measured(folder, point, evs, f, rows, log)
    made = derive.record_of(folder)
    store.publish(folder, folder, made.record, made.tables, "attempt", raw_files=made.raw_files)
    record = store.read(folder / store.RESULT)
    (folder / raw.MEASUREMENT).unlink()
    (folder / raw.MONITOR).unlink()
    record["files"].pop(raw.MONITOR)
    (folder / store.RESULT).write_text(json.dumps(record))
    return record


CASES = {
    "ok": (events(), facts(), False),
    "timeout": (events("error"), facts(ended="timeout", time_limit_s=30.0), False),
    "hung, left behind": (events("error"), facts(ended="hung", hang_s=60.0, unreaped=4242, kill_wait_s=5.0), False),
    "oom by the monitor": (events("error"), facts(over_memory=True, memory_limit_mb=300.0, memory_cap="rlimit"), False),
    "oom by the cap": (events("error"), facts(capped=True, memory_limit_mb=300.0), False),
    "oom by the cgroup": ([{"e": "process_start", "t": 100.2}], facts(returncode=-9, oom_killed="over 200 MB"), False),
    "suspended": (events(), facts(pauses=(12.5, 3.25)), False),
    "preempted, refused": (events("error"), facts(ended="preempted", requeue_refused="JobRequeue=0"), False),
    "lock lost": (events(), facts(lock_intact=False, attempt={"attempt": 2, "lock_mode": "exclusive"}), False),
    "monitor died": (events(), facts(monitor_died=(104.25, "OSError: boom"), monitor_cpu_s=0.5), False),
    "gpu": (events(), facts(gpu_idle={"gpu_mem_idle_mb": 400.0, "gpu_power_idle_w": 50.0},
                            machine={"host": "h", "gpu_model": "H100", "gpu_state": None}), True),
    "never started": ([], facts(returncode=1), False),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_point_an_earlier_layout_recorded_is_adopted_and_its_record_made_again_the_same(point, tmp_path, case):
    """The facts an earlier record holds are read back from it: the record made again from the adopted measurement
    is the one the earlier dlbench made, field for field."""
    evs, f, gpu = CASES[case]
    folder = tmp_path / "p"
    old = earlier(folder, point, evs, f, samples(gpu), log="Traceback\nKilled\n")
    assert earlier_layout.adopt(folder) and raw.whole(folder)
    assert not earlier_layout.adopt(folder)  # once
    made = derive.record_of(folder)
    assert made.record["attempt_id"] == old["attempt_id"]
    old.pop("files")
    assert set(made.record) == set(old), set(made.record) ^ set(old)
    for key, value in old.items():
        if isinstance(value, float):
            assert made.record[key] == pytest.approx(value, rel=1e-9, abs=1e-9), key
        else:
            assert made.record[key] == value, key
    with open(folder / store.TABLES[1], newline="") as fh:
        old_samples = list(csv.DictReader(fh))
    assert [r["phase"] for r in made.tables[1][2]] == [r["phase"] for r in old_samples]


def test_what_is_not_a_whole_earlier_record_is_not_adopted(point, tmp_path):
    """No record, a record that cannot be read, or one whose files disagree: nothing is adopted, the point trains
    again."""
    assert not earlier_layout.adopt(tmp_path / "none")
    folder = tmp_path / "cut"
    earlier(folder, point, events(), facts(), samples())
    (folder / store.RESULT).write_text('{"id": "x", ')
    assert not earlier_layout.adopt(folder) and not (folder / raw.MEASUREMENT).exists()
    folder = tmp_path / "disagrees"
    earlier(folder, point, events(), facts(), samples())
    (folder / store.TABLES[0]).write_text("kind\n")
    assert not earlier_layout.adopt(folder) and not (folder / raw.MEASUREMENT).exists()
    assert earlier_layout.adopt_all([tmp_path / "none", folder]) == []


def test_the_adopted_measurements_are_noted_until_snakemake_has_their_metadata(point, tmp_path):
    """adopt_all notes each adopted measurement (dlbench.rules.adopted gives their train jobs Snakemake's metadata at
    the next run and removes the note); adopting more adds to the note."""
    pending = tmp_path / "pending.json"
    for name in ("a", "b"):
        earlier(tmp_path / name, point, events(), facts(), samples())
    assert earlier_layout.adopt_all([tmp_path / "a"], pending) == [str(tmp_path / "a")]
    assert earlier_layout.adopt_all([tmp_path / "a", tmp_path / "b"], pending) == [str(tmp_path / "b")]
    assert earlier_layout.pending_metadata(pending) == [str(tmp_path / n / raw.MEASUREMENT) for n in ("a", "b")]


def test_a_record_from_before_the_adapters_took_their_defaults_is_trained_again(point, tmp_path):
    """A record without memory_format_in_effect was made when PyTorch's CPU points ran channels-last, an opt-in
    its users do not get: it is not adopted (its point trains again), where the same record with it is."""
    earlier(tmp_path / "now", point, events(), facts(), samples())
    earlier(tmp_path / "before", point, events(), facts(), samples())
    record = json.loads((tmp_path / "before" / store.RESULT).read_text())
    assert earlier_layout.SINCE_DEFAULTS in record
    del record[earlier_layout.SINCE_DEFAULTS]
    (tmp_path / "before" / store.RESULT).write_text(json.dumps(record))
    assert not store.disagreement(tmp_path / "before" / store.RESULT, store.read(tmp_path / "before" / store.RESULT))
    adopted = earlier_layout.adopt_all([tmp_path / "now", tmp_path / "before"], tmp_path / "pending.json")
    assert adopted == [str(tmp_path / "now")] and not (tmp_path / "before" / raw.MEASUREMENT).exists()


def test_an_adopted_points_prepared_input_keeps_its_preparation(tmp_path):
    """Caffe's HDF5 files, written before the code digest took its new form: their Snakemake record is removed, so
    that the digest's new form alone does not prepare them again (and train every Caffe point with them), and they
    are noted for the metadata of the next run; a file not there, or with no record, is left as it is."""
    from base64 import urlsafe_b64encode

    metadata, pending = tmp_path / ".snakemake/metadata", tmp_path / "pending.json"
    metadata.mkdir(parents=True)
    kept, missing, unrecorded = (str(tmp_path / name) for name in ("train.h5", "test.h5", "meta.json"))
    Path(kept).write_text("x")
    Path(unrecorded).write_text("x")
    record = {f: metadata / urlsafe_b64encode(f.encode()).decode() for f in (kept, missing)}
    for r in record.values():
        r.write_text("{}")
    earlier_layout.adopt_all([], pending)  # nothing adopted: nothing noted
    assert earlier_layout.forget_preparations([kept, missing, unrecorded], pending, metadata) == [kept]
    assert not record[kept].exists() and record[missing].exists()
    assert earlier_layout.pending_metadata(pending) == [kept]


def test_a_record_that_is_not_one_is_made_again_from_its_measurement(point, tmp_path):
    """Invalid UTF-8 or JSON cut short in metrics.json: the record rule makes it again, whole."""
    folders = study(tmp_path, point, 2)
    rebuild.rebuild(folders, tmp_path / "records.json", "code")
    (folders[0] / store.RESULT).write_bytes(b"\xff\xfe not a record")
    (folders[1] / store.RESULT).write_bytes((folders[1] / store.RESULT).read_bytes()[:72])
    assert rebuild.rebuild(folders, tmp_path / "records.json", "code").written == 2
    assert all(store.read(f / store.RESULT)["status"] == "ok" for f in folders)


def test_a_record_published_again_after_a_requeue_says_so_when_made_again(point, tmp_path):
    """A requeued SLURM job publishes a point it had finished again (store.republish): the record rule, making it
    again from the measurement, keeps `republished_after_requeue` and the attempt's id."""
    (folder,) = study(tmp_path, point, 1)
    (attempt,) = store.attempts(folder)
    first = store.read(folder / store.RESULT)
    again = store.republish(attempt, folder, republished_after_requeue=1)
    assert again["republished_after_requeue"] == 1 and raw.whole(folder)
    made = derive.record_of(folder)
    assert made.record["republished_after_requeue"] == 1 and made.record["attempt_id"] == first["attempt_id"]
    assert not store.rewrite(folder, made.record, made.tables, made.raw_files)  # the same record
