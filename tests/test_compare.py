"""Two result sets compared: hand-made ones whose verdicts are worked out by hand, and the statistics under them."""

import math
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

import dlbench
from dlbench import compare, compare_stats
from dlbench.testing.sandbox import copy_workflow, snakemake, tiny_study

T_975_DF8 = 2.306004  # Student's t, 97.5% quantile, 8 degrees of freedom (a printed table's value)


def run(setting: dict, repeat: int, time_s: float, acc: float = 0.9, status: str = "ok", **extra) -> dict:
    base = {"framework": "pytorch", "dataset": "digits", "preset": "caffe", "network": "lenet", "optimizer": "sgd",
            "momentum": 0.9, "weight_decay": 0.0, "batch_size": 32, "iterations_planned": 30, "iterations": 30,
            "device": "cpu", "threads": 1, "library": "default", "test_batch_size": 100}
    row = {**base, **setting, "repeat": repeat, "seed": 1 + repeat, "status": status,
           "train_time_s": time_s if status == "ok" else None, "test_time_s": time_s / 10 if status == "ok" else None,
           "accuracy": acc if status == "ok" else None, **extra}
    row["run_id"] = f"{row['framework']}-lr{row['learning_rate']}-r{repeat}"
    return row


SLOW = {"learning_rate": 0.01}                              # 1.5 x slower in B, same accuracy
TIE = {"framework": "tensorflow", "learning_rate": 0.01}    # B within the noise of A; one B run contended
ONLY_A = {"learning_rate": 0.1}                              # measured in A only
FAILS_IN_B = {"framework": "tensorflow", "learning_rate": 0.1}  # finished in A, every run failed in B


def hand_made() -> tuple[pd.DataFrame, pd.DataFrame]:
    times_a = [10.0, 10.2, 9.8, 10.1, 9.9]
    a = [run(SLOW, i, t, host="node-a") for i, t in enumerate(times_a)]
    b = [run(SLOW, i, t * 1.5, host="node-b") for i, t in enumerate(times_a)]
    a += [run(TIE, i, t, acc=0.8 + i / 100, host="node-a") for i, t in enumerate([20.0, 21.0, 19.0])]
    b += [run(TIE, i, t, acc=0.8 + i / 100, host="node-b", contended=i == 1) for i, t in enumerate([20.5, 19.5, 21.0])]
    a += [run(ONLY_A, i, 5.0 + i / 10, host="node-a") for i in range(2)]
    a += [run(FAILS_IN_B, i, 7.0 + i / 10, host="node-a") for i in range(2)]
    b += [run(FAILS_IN_B, i, 0.0, status="error", host="node-b") for i in range(2)]
    return pd.DataFrame(a), pd.DataFrame(b)


def row_of(table: pd.DataFrame, framework: str, lr: float, metric: str) -> pd.Series:
    (i,) = table.index[(table.framework == framework) & (table.learning_rate == lr) & (table.metric == metric)]
    return table.loc[i]


def test_a_known_slowdown_a_tie_and_points_in_one_set_only(tmp_path):
    a, b = hand_made()
    a.to_parquet(tmp_path / "a.parquet")
    (tmp_path / "b").mkdir()
    b.to_parquet(tmp_path / "b" / "runs.parquet")  # a results folder
    assert compare.main([str(tmp_path / "a.parquet"), str(tmp_path / "b"), "--out", str(tmp_path / "out")]) == 0
    table = pd.read_parquet(tmp_path / "out" / "comparison.parquet")

    # The slowdown by hand: both sides' variance is 0.025 x (mean^2 / 100), so each mean adds 0.025 / (5 x 100)
    # = 5e-5 to var(log ratio): se 0.01, Welch's df (1e-4)^2 / (2 (5e-5)^2 / 4) = 8.
    slow = row_of(table, "pytorch", 0.01, "train_time_s")
    assert (slow.a_n, slow.b_n) == (5, 5)
    assert slow.a_mean == pytest.approx(10.0) and slow.b_mean == pytest.approx(15.0)
    assert slow.ratio == pytest.approx(1.5)
    assert slow.ratio_ci_low == pytest.approx(1.5 * math.exp(-T_975_DF8 * 0.01), rel=1e-5)
    assert slow.ratio_ci_high == pytest.approx(1.5 * math.exp(T_975_DF8 * 0.01), rel=1e-5)
    # A's mean interval: 10 +- t(4) x sqrt(0.025 / 5), t(4) = 2.776445
    assert slow.a_ci_low == pytest.approx(10 - 2.776445 * math.sqrt(0.005), rel=1e-5)
    assert slow.verdict == "slower"
    assert row_of(table, "pytorch", 0.01, "accuracy").verdict == "same (within noise)"  # identical in both

    tie = row_of(table, "tensorflow", 0.01, "train_time_s")
    assert tie.ratio == pytest.approx(61 / 3 / 20)
    assert tie.ratio_ci_low < 1 < tie.ratio_ci_high
    assert tie.verdict == "same (within noise) (contended runs)" and tie.contended and tie.b_contended == 1

    only = row_of(table, "pytorch", 0.1, "train_time_s")
    assert only.verdict == "only in A" and only.a_n == 2 and only.b_n == 0
    failed = row_of(table, "tensorflow", 0.1, "accuracy")
    assert failed.verdict == "no finished run in B" and failed.b_failed == 2

    text = (tmp_path / "out" / "comparison.md").read_text()
    assert "- host: A node-a; B node-b" in text
    changed = text.split("## Changed beyond the noise: ")[1].split("## Counted")[0]
    # train and test time (a tenth of it in every run) slower; nothing else
    assert changed.startswith("2\n") and changed.count("| pytorch | digits | cpu |") == 2
    assert ("| train_time_s | 10 s [9.8 s, 10.2 s] (n=5) | 15 s [14.7 s, 15.3 s] (n=5) | 1.500 [1.466, 1.535] "
            "| slower |") in changed
    # per framework: PyTorch's one compared setting is 1.5 x slower, but one setting is no sample
    assert "| pytorch | train_time_s | 1 | 1.500 | too few settings (fewer than 2 on a side) |" in text
    assert "In A only: 1 settings (pytorch 1), not compared." in text
    assert "In B only: 0 settings" in text
    assert "Settings with contended runs (timed while other work took the machine's CPUs): 1" in text
    assert "| train_time_s | same (within noise) (contended runs) | 1 |" in text
    html = (tmp_path / "out" / "comparison_ratios.html").read_text()
    assert "vegaEmbed" in html and "B / A per framework" in html
    assert (tmp_path / "out" / "comparison_ratios.svg").read_text().lstrip().startswith("<svg")


def test_records_with_a_setting_id_join_on_it_whatever_else_differs():
    a, b = hand_made()
    for df in (a, b):
        df["setting_id"] = df["framework"] + df["learning_rate"].astype(str)
    b["test_batch_size"] = 50  # would split the settings if the columns were the key
    table = compare.compare(a, b)
    assert row_of(table, "pytorch", 0.01, "train_time_s").verdict == "slower"
    assert set(table.setting) == {"pytorch0.01", "tensorflow0.01", "pytorch0.1", "tensorflow0.1"}


def test_a_small_shift_in_every_setting_shows_per_framework():
    """Ten settings of 3 repeats, B about 3% slower in each (+-2% noise within a setting): no setting alone
    tells, the framework's ten settings do."""
    a, b = [], []
    for k in range(10):
        shift = (0.99, 1.0, 1.01)[k % 3]  # B's slowdown varies a little between settings: 1.03 x this
        for repeat, noise in enumerate((0.98, 1.0, 1.02)):
            a.append(run({"learning_rate": k + 1.0}, repeat, 10.0 * noise))
            b.append(run({"learning_rate": k + 1.0}, repeat, 10.3 * shift * noise))
    table = compare.compare(pd.DataFrame(a), pd.DataFrame(b))
    train = table[table.metric == "train_time_s"]
    assert (train.verdict == compare.SAME).all()
    row = compare.per_framework(table).set_index("metric").loc["train_time_s"]
    # the geometric mean of the settings' ratios: four at 1.03 x 0.99, three at 1.03, three at 1.03 x 1.01
    assert row.settings == 10
    assert row.ratio == pytest.approx(1.03 * math.exp((4 * math.log(0.99) + 3 * math.log(1.01)) / 10))
    assert row.ratio_ci_low > 1 and row.verdict == "slower"


def test_one_run_a_side_is_not_tested():
    a = pd.DataFrame([run(SLOW, 0, 10.0)])
    b = pd.DataFrame([run(SLOW, 0, 30.0)])
    row = row_of(compare.compare(a, b), "pytorch", 0.01, "train_time_s")
    assert row.ratio == pytest.approx(3.0) and np.isnan(row.ratio_ci_low)
    assert row.verdict == compare.TOO_FEW


def test_a_folder_without_results_is_refused_in_one_line(tmp_path, capsys):
    a, _ = hand_made()
    a.to_parquet(tmp_path / "a.parquet")
    assert compare.main([str(tmp_path / "a.parquet"), str(tmp_path), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and f"{tmp_path} holds no results" in err


def test_ratio_without_spread_is_exact():
    got = compare_stats.ratio_of_means([0.9, 0.9], [0.0, 0.0], [3, 3], [0.9, 0.8], [0.0, 0.0], [3, 3])
    assert list(got["p_value"]) == [1.0, 0.0]
    assert got["ratio_ci_low"][1] == pytest.approx(0.8 / 0.9) == got["ratio_ci_high"][1]


# ---------------------------------------------------------------------------------------------- two real runs


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    """The tiny study (one learning rate, 3 repeats) run twice, in two copies of the workflow started together:
    their points take turns on the machine's measurement lock, so that both sets are timed under the same load.
    Then B's config names A as its baseline, which adds the compare rule (no point runs again)."""
    study = {**tiny_study(), "repeats": 3}
    study["sweep"] = {**study["sweep"], "learning_rate": [0.01]}
    root = tmp_path_factory.mktemp("two")
    copies = [copy_workflow(root / name, study, "tiny.yaml") for name in ("a", "b")]
    procs = [subprocess.Popen([sys.executable, "-m", "snakemake", "--cores", "1", "--configfile", "tiny.yaml"],
                              cwd=c, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for c in copies]
    for proc in procs:
        out = proc.communicate(timeout=1800)[0]
        assert proc.returncode == 0, out[-3000:]
    a, b = copies
    (b / "tiny.yaml").write_text(yaml.safe_dump({**study, "compare": {"baseline": str(a / "results")}}))
    proc = snakemake(b, "--configfile", "tiny.yaml")
    return a, b, proc.stdout + proc.stderr


def contended_runs(runs: pd.DataFrame) -> pd.Series:
    """Per framework, how many of a result set's runs its runs table marks contended (timed while other work took
    the machine's CPUs; dlbench.hostload): records without the flag count as quiet."""
    flag = runs["contended"] if "contended" in runs else pd.Series(False, index=runs.index)
    return flag.map(lambda v: v is True or v == 1).groupby(runs["framework"]).sum()


def assert_nothing_changed_beyond_the_noise(a: Path, b: Path) -> None:
    """B's comparison (b/results/compare) against A, two runs of one config: every verdict is `same` unless the runs
    it counts were contended, as the runs tables say; a contended verdict says so; accuracy, not a timing, is the
    same whatever the load; comparison.md counts what the table says."""
    runs_a, runs_b = (pd.read_parquet(x / "results/runs.parquet") for x in (a, b))
    table = pd.read_parquet(b / "results/compare/comparison.parquet")
    busy_a, busy_b = contended_runs(runs_a), contended_runs(runs_b)
    cols = ["framework", "metric", "a_contended", "b_contended", "ratio", "ratio_ci_low", "ratio_ci_high", "p_holm",
            "verdict"]
    for _, row in table.iterrows():
        what = row[cols].to_dict()
        # the contended counts are the runs tables' (each framework is one setting here)
        assert (row["a_contended"], row["b_contended"]) == (busy_a[row["framework"]], busy_b[row["framework"]]), what
        contended = busy_a[row["framework"]] + busy_b[row["framework"]] > 0
        assert bool(row["contended"]) == contended, what
        # a verdict carries the mark exactly where its runs were contended
        mark = compare.CONTENDED if contended else ""
        assert row["verdict"].endswith(compare.CONTENDED) == contended, what
        base = row["verdict"].removesuffix(mark)
        if row["metric"] == "accuracy" or not contended:
            assert base == compare.SAME, what  # quiet timings, and accuracy under any load: the same
        else:  # a contended timing may have changed, and says which way
            assert base in {compare.SAME, *compare.METRICS[row["metric"]]}, what
    # accuracy is compared for every framework, whatever the load: never nothing to check
    acc = table[table.metric == "accuracy"]
    assert set(acc.framework) == set(runs_b.framework) and len(acc) == runs_b.framework.nunique()
    assert np.allclose(acc.ratio, 1.0, atol=0.02), acc  # the same seeds train to the same accuracy on one machine
    text = (b / "results/compare/comparison.md").read_text()
    assert "# this study (B) against" in text
    words = {w for pair in compare.METRICS.values() for w in pair}
    changed = sum(v.removesuffix(compare.CONTENDED) in words for v in table.verdict)  # contended timings, if any
    assert f"## Changed beyond the noise: {changed}\n" in text
    busy = int(((busy_a + busy_b) > 0).sum())
    assert (f"Settings with contended runs (timed while other work took the machine's CPUs): {busy};" in text
            if busy else "No run of either set is marked contended" in text)


@pytest.mark.long
def test_two_real_runs_of_one_config_differ_in_nothing_beyond_the_noise(two_runs):
    a, b, _ = two_runs
    runs = pd.read_parquet(b / "results/runs.parquet")
    assert (runs.status == "ok").all() and len(runs) == 6
    for column in ("setting_id", "dlbench_version", "dlbench_commit", "dlbench_dirty", "cpu_governor", "cpu_boost"):
        assert column in runs.columns, column
    assert runs.groupby("framework").setting_id.nunique().eq(1).all()  # the repeats share their setting
    assert runs.dlbench_version.eq(dlbench.__version__).all()
    table = pd.read_parquet(b / "results/compare/comparison.parquet")
    assert len(table) == 2 * len(compare.METRICS)
    assert (table.a_n == 3).all() and (table.b_n == 3).all()
    # Uncontended, nothing differs beyond the noise; where something else loaded the machine during either run
    # (the runs tables say which), the comparison may see a change in a timing, and says its runs were contended.
    assert_nothing_changed_beyond_the_noise(a, b)


@pytest.mark.long
def test_the_compare_rule_runs_when_the_config_names_a_baseline_and_nothing_else_reruns(two_runs):
    a, b, jobs = two_runs
    assert "rule compare:" in jobs or "localrule compare:" in jobs
    assert "rule train:" not in jobs and "localrule train:" not in jobs
    for name in compare.OUTPUTS:
        assert (b / "results/compare" / name).stat().st_size > 0
    (b / "bad.yaml").write_text(yaml.safe_dump({**yaml.safe_load((b / "tiny.yaml").read_text()),
                                                 "compare": {"baseline": str(a / "nothing-here")}}))
    proc = snakemake(b, "-n", "--configfile", "bad.yaml", check=False)
    lines = [ln for ln in (proc.stdout + proc.stderr).splitlines() if "dlbench: config error" in ln]
    assert proc.returncode != 0 and len(lines) == 1 and "nothing-here holds no runs.parquet" in lines[0]


@pytest.mark.long
def test_selecting_finished_points_by_status_runs_them_again(two_runs):
    _, b, _ = two_runs
    plain = snakemake(b, "-n", "--configfile", "tiny.yaml", "--config", 'select={"status": ["ok"]}')
    assert "dlbench: select.status removed 0; 6 of 6 points remain" in plain.stderr
    assert "dlbench: select.status: 6 of the points kept have a record; add --forcerun train" in plain.stderr
    assert not re.search(r"^train\s", plain.stdout, re.M)
    forced = snakemake(b, "-n", "--configfile", "tiny.yaml", "--config", 'select={"status": ["ok"]}',
                       "--forcerun", "train")
    assert re.search(r"^train\s+6$", forced.stdout, re.M), forced.stdout[-2000:]
    assert "add --forcerun" not in forced.stderr
    none = snakemake(b, "-n", "--configfile", "tiny.yaml", "--config", 'select={"status": ["error", "timeout"]}',
                     "--forcerun", "train")
    assert "select.status removed 6; 0 of 6 points remain" in none.stderr
    assert not re.search(r"^train\s", none.stdout, re.M)
