"""The findings' calibration (dlbench.analysis.calibrate): whole runs tables shaped like config/config.yaml, with a
known truth, through the findings' own functions.

No sentence claims a difference, an equivalence or an agreement the truth does not hold more than 5 % of the time,
and the planted 3-sigma differences are found (each within two simulation standard errors); and the check fails
where the findings group the wrong runs: a sweep pooled into a preset's point, contended runs counted, the
unblocked test where one seed is missing, "higher" for a drop."""

from __future__ import annotations

import json
import sys

import numpy as np
import pandas as pd
import pytest

from dlbench import cli
from dlbench.analysis import calibrate, designs, groups, observations, simulate

# The CI tier's run: the null and the planted scenario, 5 repeats, 6 replications each (about 20 s on 2 cores).
CI_REPLICATIONS = 6


@pytest.fixture(scope="module")
def ci_rows():
    return calibrate.run(CI_REPLICATIONS, seed=1, repeats=(5,), jobs=2)


def test_no_sentence_claims_what_the_truth_does_not_hold(ci_rows):
    false_claims = [line for line in calibrate.failures(ci_rows) if "power" not in line]
    assert false_claims == [], calibrate.text(ci_rows)


def test_the_planted_differences_are_found_or_their_power_is_documented(ci_rows):
    assert calibrate.short_of_power(ci_rows) <= designs.DEFAULT.underpowered, calibrate.text(ci_rows)


@pytest.mark.long
def test_the_documented_table_is_calibrated():
    rows = calibrate.run(100, repeats=(5,), jobs=2)
    assert [line for line in calibrate.failures(rows) if "power" not in line] == [], calibrate.text(rows)
    assert calibrate.short_of_power(rows) <= designs.DEFAULT.underpowered, calibrate.text(rows)


# -- the check fails on a wrong grouping, planted in the code the findings run


def _replace(monkeypatch, original, replacement) -> None:
    """Put `replacement` wherever a dlbench module holds `original` (its home and every module that imported it
    by name), as a wrong edit of it would."""
    for module in list(sys.modules.values()):
        if getattr(module, "__name__", "").startswith("dlbench."):
            for name, value in list(vars(module).items()):
                if value is original:
                    monkeypatch.setattr(module, name, replacement)


def _sentences(*names: str) -> list:
    chosen = [s for s in designs.DEFAULT.sentences() if s.name in names]
    assert len(chosen) == len(names)
    return chosen


def _planted(chosen, replications: int = 10, seed: int = 4) -> list:
    return calibrate.run(replications, seed=seed, repeats=(5,), chosen=chosen, only=["planted"])


def _found(rows) -> float:
    return min(r.rate("found") for r in rows)


def test_pooling_a_sweep_into_a_presets_point_fails(monkeypatch):
    chosen = _sentences("own defaults best, pytorch")
    assert calibrate.failures(_planted(chosen)) == []  # each preset at its own point: the planted Caffe preset found
    monkeypatch.setattr(groups, "_default_rows", lambda g, preferred: np.ones(len(g), dtype=bool))
    pooled = _planted(chosen)  # batch 256 pooled into Caffe's preset on PyTorch, as defaults_table once did
    assert any("power" in line for line in calibrate.failures(pooled)), calibrate.text(pooled)


def test_counting_contended_runs_fails(monkeypatch):
    chosen = _sentences("leader, own defaults, train time")
    assert calibrate.failures(_planted(chosen)) == []
    original = groups.ok_points

    def counts_contended(df: pd.DataFrame, *metrics: str, positive: bool = False) -> pd.DataFrame:
        return original(df.assign(contended=False), *metrics, positive=positive)

    _replace(monkeypatch, original, counts_contended)
    counted = _planted(chosen)  # Caffe's run timed under outside load counted in its own defaults
    assert any("power" in line for line in calibrate.failures(counted)), calibrate.text(counted)


def test_the_unblocked_test_where_one_seed_is_missing_fails(monkeypatch):
    chosen = _sentences("framework effect, accuracy")
    assert calibrate.failures(_planted(chosen, 16)) == []
    original = groups.shared_seeds

    def unblocked_when_one_is_missing(values):
        seeds, left_out = original(values)
        return ([], left_out) if left_out else (seeds, left_out)

    _replace(monkeypatch, original, unblocked_when_one_is_missing)
    unblocked = _planted(chosen, 16)  # the one-way ANOVA, as summary.framework_effect once fell back to: its
    # "differ" is not the blocked test's finding
    assert any("power" in line for line in calibrate.failures(unblocked)), calibrate.text(unblocked)


def test_higher_for_a_drop_fails(monkeypatch):
    chosen = _sentences("(e) accuracy's change in words")
    assert calibrate.failures(_planted(chosen, 4)) == []
    original = observations._change
    monkeypatch.setattr(observations, "_change", lambda j, smaller, larger: original(j, larger, smaller))
    swapped = _planted(chosen, 4)
    assert swapped[0].rate("false difference") == 1.0, calibrate.text(swapped)
    assert any("false difference" in line for line in calibrate.failures(swapped))


# -- the pieces


def test_the_simulated_study_is_the_default_config_s_shape():
    template = simulate.study_template(str(simulate.DEFAULT_CONFIG), 4)
    runs = simulate.simulate(template, simulate.planted(3), simulate.Noise(), np.random.default_rng(0))
    own = runs[runs["preset"] == "own"]
    assert set(own["framework"]) == {"pytorch", "tensorflow", "theano", "caffe"}
    assert own.groupby("framework")["batch_size"].first().to_dict() == {"caffe": 64, "pytorch": 10,
                                                                       "tensorflow": 50, "theano": 500}
    # PyTorch's preset trains 2,000 of the 4,000 images: half the images of Caffe's 4 epochs, or less
    images = own.groupby("framework")["images_trained"].first()
    assert images["pytorch"] == 8000 and images["caffe"] == 4 * 63 * 64
    assert sorted(runs.loc[(runs["framework"] == "pytorch") & (runs["preset"] == "caffe"), "batch_size"].unique()) \
        == [64, 256]
    assert runs["contended"].sum() == 2 and (runs["status"] != "ok").sum() == 1
    assert "caffe" in set(runs.loc[runs["contended"] & (runs["preset"] == "own"), "framework"])
    count = 1000  # mnist_5k's test images: every accuracy is k / 1000
    assert np.allclose(runs["accuracy"].dropna() * count, np.round(runs["accuracy"].dropna() * count))
    assert set(runs["seed"]) == {1, 2, 3, 4}


def test_the_simulation_plants_what_it_says():
    noise = simulate.Noise(missing_study=None, contended_factor=1.0)
    template = simulate.study_template(str(simulate.DEFAULT_CONFIG), 4)
    rng = np.random.default_rng(1)
    many = pd.concat([simulate.simulate(template, simulate.planted(2), noise, rng) for _ in range(300)])
    own = many[many["preset"] == "own"].groupby("framework")
    log_t = own["train_time_s"].apply(lambda t: np.log(t).mean())
    assert np.isclose(log_t["theano"] - log_t["caffe"], 2 * noise.time_log_sd, rtol=0.1)
    acc = own["accuracy"].mean()
    assert np.isclose(acc["tensorflow"] - acc["theano"], 2 * noise.run_accuracy_sd, rtol=0.1)
    assert np.isclose(own["accuracy"].std()["theano"], noise.run_accuracy_sd, rtol=0.1)


def test_the_rates_count_each_claim():
    s = _sentences("own defaults best, pytorch")[0]
    null = calibrate.tally(s, "null", 5, ["other better", "equivalent", "inconclusive", "inconclusive"])
    assert null.rate("false difference") == 0.25 and null.rate("false equivalence") == 0
    assert np.isnan(null.rate("found")) and np.isclose(null.se["false difference"], np.sqrt(0.25 * 0.75 / 4))
    planted = calibrate.tally(s, "planted 3 sd", 5, ["other better", "own better", "equivalent", "inconclusive"])
    assert planted.rate("found") == 0.25 and planted.rate("false difference") == 0.25
    assert planted.rate("false equivalence") == 0.25


def test_the_same_seed_gives_the_same_table_for_any_number_of_jobs():
    chosen = _sentences("own defaults best, tensorflow")
    one = calibrate.run(4, seed=5, repeats=(4,), chosen=chosen, jobs=1)
    two = calibrate.run(4, seed=5, repeats=(4,), chosen=chosen, jobs=2)
    assert [r.words for r in one] == [r.words for r in two]


def test_the_command_prints_the_table_and_writes_json(tmp_path, capsys, monkeypatch):
    out = tmp_path / "calibration.json"
    assert cli.main(["calibrate", "--quick", "--replications", "2", "--jobs", "1", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert printed.splitlines()[0].split()[:3] == ["sentence", "scenario", "repeats"]
    assert "(a)" in printed and "framework effect, accuracy" in printed
    data = json.loads(out.read_text())
    assert data["settings"]["replications"] == 2 and len(data["rows"]) == 2 * len(designs.DEFAULT.sentences())
    assert set(data["rows"][0]["rates"]) == set(calibrate.RATES)


def test_a_json_file_in_a_missing_folder_is_refused_before_the_simulation(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(calibrate, "run", lambda *a, **k: pytest.fail("simulated before refusing the --json path"))
    out = tmp_path / "no-such-folder" / "calibration.json"
    assert cli.main(["calibrate", "--quick", "--json", str(out)]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "--json" in line and "no-such-folder" in line and "create it" in line


# -- the paper's design


@pytest.fixture(scope="module")
def paper_template():
    return simulate.study_template(str(designs.PAPER.config), 3)


def test_the_paper_design_simulates_every_sub_study_of_paper_yaml(paper_template):
    t = paper_template
    studies = set().union(*t["studies"].str.split(","))
    assert {"defaults", "cross", "batch_size", "learning_rate", "length", "threads", "library", "tuning",
            "float64_theano", "layout"} <= studies
    assert set(t["dataset"]) == {"mnist", "cifar10"} and set(t["device"]) == {"cpu", "gpu"}
    assert set(t["seed"]) == {1, 2, 3}  # the config's seed (1) plus each repeat, from 0
    assert (t.loc[t["precision"] == "fp64", "framework"].isin(["theano", "pytorch"])).all()
    assert t["test_count"].eq(10000).all()  # MNIST's and CIFAR-10's test sets: k / 10,000


def test_the_paper_truths_are_the_planted_scenarios_arithmetic(paper_template):
    """Each leader the paper design says holds (designs.PAPER_LEADERS) leads the own-defaults points of its dataset
    and device by at least one planted step, as simulate.planted_paper's rules add up; the GPU is faster for every
    framework and its gains rank in the published order; batch and length shift as the docstring says."""
    k = 3.0
    t = paper_template
    shift = simulate._shifts(t, simulate.planted_paper(k), designs.PAPER.noise)
    own = (t["reading"] == "own") & t["studies"].str.contains("defaults") & t["precision"].isna()
    frame = t.assign(time=shift["time"], accuracy=shift["accuracy"], test_time=shift["test_time"])[own]
    per = frame.groupby(["dataset", "device", "framework"])[["time", "accuracy", "test_time"]].mean()
    for (dataset, device, metric), leader in designs.PAPER_LEADERS.items():
        col = "time" if metric == "train_time_s" else "accuracy"
        values = per.loc[(dataset, device), col]
        best = values.idxmin() if col == "time" else values.idxmax()
        gap = (values.drop(leader) - values[leader]).abs().min()
        assert best == leader and gap >= k - 1e-9, (dataset, device, metric, values.to_dict())
    gains = per["time"].xs("cpu", level="device") - per["time"].xs("gpu", level="device")
    assert (gains >= k - 1e-9).all()  # (c): the GPU faster for every framework by a step or more
    for dataset, order in (("mnist", ["pytorch", "theano", "tensorflow", "caffe"]),
                           ("cifar10", ["pytorch", "caffe", "tensorflow", "theano"])):  # (i): the published order
        ranked = gains.xs(dataset).sort_values(ascending=False)
        assert list(ranked.index) == order and (-ranked.diff().dropna() >= k - 1e-9).all(), ranked
    assert per.loc[("cifar10", "gpu", "tensorflow"), "test_time"] - per.loc[("cifar10", "cpu", "tensorflow"),
                                                                               "test_time"] == pytest.approx(k)  # (j)
    assert per.loc[("mnist", "gpu", "pytorch"), "accuracy"] == per.loc[("mnist", "gpu", "tensorflow"), "accuracy"]
    # (e): a doubling of the batch, at the same epochs, k faster and k less accurate; (f): time proportional to images
    sweep = t.assign(time=shift["time"], accuracy=shift["accuracy"])[t["studies"].str.contains("batch_size")]
    torch = sweep[(sweep["framework"] == "caffe") & (sweep["dataset"] == "mnist") & (sweep["device"] == "cpu")
                  & (sweep["seed"] == 2)].set_index("batch_size")
    assert torch.loc[128, "accuracy"] - torch.loc[64, "accuracy"] == pytest.approx(-k)
    length = t.assign(time=shift["time"])[t["studies"].str.contains("length") & (t["framework"] == "pytorch")
                                          & (t["dataset"] == "mnist") & (t["device"] == "cpu") & (t["seed"] == 2)]
    ratio = length.set_index("epochs")["time"] * designs.PAPER.noise.time_log_sd
    assert ratio[20] - ratio[10] == pytest.approx(np.log(2))  # log time: twice the epochs, twice the time


@pytest.mark.long
def test_the_paper_design_is_calibrated():
    rows = calibrate.run(20, repeats=(5,), jobs=2, design=designs.PAPER)
    assert [line for line in calibrate.failures(rows) if "power" not in line] == [], calibrate.text(rows)
    assert calibrate.short_of_power(rows) <= designs.PAPER.underpowered, calibrate.text(rows)
