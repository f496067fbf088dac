"""The verdicts' calibration (dlbench.analysis.calibrate): simulated runs with a known truth through the real findings
code.
Every verdict says "better" under the null at most 5 % of the time and finds a 3-sigma difference with 5 repeats at
least 80 % of the time (each within two simulation standard errors); a verdict that does not is caught."""

from __future__ import annotations

import json
from functools import partial

import numpy as np
import pytest

from dlbench import cli
from dlbench.analysis import calibrate, stats
from dlbench.analysis.calibrate import BETTER, INCONCLUSIVE, WRONG_WAY, Replica, Verdict

# The CI tier's run: the null and a 3-sigma difference, 5 repeats, 100 replications (about 20 s on 2 cores).
CI_REPLICATIONS = 100


@pytest.fixture(scope="module")
def ci_rows():
    return calibrate.run(CI_REPLICATIONS, seed=1, repeats=(5,), effects=(0.0, 3.0), jobs=2)


@pytest.mark.parametrize("name", [v.name for v in calibrate.verdicts()])
def test_each_verdict_is_calibrated(ci_rows, name):
    rows = [r for r in ci_rows if r.verdict == name]
    assert len(rows) == 2 and all(r.replications == CI_REPLICATIONS for r in rows)
    assert calibrate.failures(rows) == [], calibrate.text(rows)


@pytest.mark.long
def test_the_full_table_is_calibrated():
    rows = calibrate.run(jobs=2)  # the documented table: every verdict, 3 and 5 repeats, 0-3 sd
    assert calibrate.failures(rows) == [], calibrate.text(rows)


# -- the check can fail: verdicts broken on purpose, passed in as any verdict is


def _welch_p(rep: Replica) -> tuple[float, float]:
    """Welch's p of PLANTED's train times against another framework's, and the difference of their means."""
    df = rep.own_points
    a, b = (df.loc[df["framework"] == fw, "train_time_s"].to_numpy() for fw in ("pytorch", "tensorflow"))
    return stats.welch(a, b).p, a.mean() - b.mean()


def _eager(rep: Replica) -> str:
    """Says "better" at p < 0.5: ten times too often under the null."""
    p, diff = _welch_p(rep)
    return (BETTER if diff < 0 else WRONG_WAY) if p < 0.5 else INCONCLUSIVE


def _timid(alpha: float, rep: Replica) -> str:
    """Says "better" only at p < alpha: with alpha 1e-9, almost never."""
    p, diff = _welch_p(rep)
    return (BETTER if diff < 0 else WRONG_WAY) if p < alpha else INCONCLUSIVE


def test_a_verdict_that_says_better_too_often_fails():
    rows = calibrate.run(60, seed=2, repeats=(5,), effects=(0.0,), chosen=[Verdict("eager", _eager)])
    assert rows[0].rate(BETTER) > 0.3
    assert any("false 'better'" in line for line in calibrate.failures(rows))


def test_a_verdict_that_misses_a_planted_difference_fails():
    rows = calibrate.run(60, seed=3, repeats=(5,), effects=(0.0, 3.0),
                         chosen=[Verdict("timid", partial(_timid, 1e-9))])
    bad = calibrate.failures(rows)
    assert len(bad) == 1 and "power" in bad[0]  # never "better" under the null: no false alarm
    # the same test at an honest level passes
    assert calibrate.failures(calibrate.run(60, seed=3, repeats=(5,), effects=(0.0, 3.0),
                                            chosen=[Verdict("welch", partial(_timid, 0.05))])) == []


# -- the pieces


def test_the_simulation_plants_what_it_says():
    noise = calibrate.Noise()
    v = calibrate.draws(np.random.default_rng(0), 2000, 5, 2.0, noise)
    p, other = calibrate.FRAMEWORKS.index(calibrate.PLANTED), 0
    log_t = np.log(v[..., 0])
    assert np.isclose(log_t[:, :2, other].std(), noise.time_log_sd, rtol=0.05)
    assert np.isclose(log_t[:, :2, other].mean() - log_t[:, :2, p].mean(), 2 * noise.time_log_sd, rtol=0.05)
    assert np.isclose(v[:, :2, p, :, 2].mean() - v[:, :2, other, :, 2].mean(), 2 * noise.accuracy_sd, rtol=0.05)
    assert abs(log_t[:, 2, p].mean() - log_t[:, 2, other].mean()) < 0.01 * noise.time_log_sd * 10  # no plant in A
    rep = calibrate.replicas(v[:1])[0]
    assert set(rep.own["preset"]) == {"own"} and set(rep.shared["preset"]) == {calibrate.SHARED_PRESET}
    assert len(rep.own) == len(calibrate.FRAMEWORKS) * 5 and (rep.own["status"] == "ok").all()


def test_under_the_null_better_either_way_is_false():
    row = calibrate.tally("x", 5, 0.0, [BETTER, WRONG_WAY, INCONCLUSIVE, INCONCLUSIVE])
    assert row.rate(BETTER) == 0.5 and np.isnan(row.rate(WRONG_WAY))
    assert np.isclose(row.se[BETTER], np.sqrt(0.5 * 0.5 / 4))
    planted = calibrate.tally("x", 5, 1.0, [BETTER, WRONG_WAY, INCONCLUSIVE, INCONCLUSIVE])
    assert planted.rate(BETTER) == 0.25 and planted.rate(WRONG_WAY) == 0.25


def test_the_same_seed_gives_the_same_table_for_any_number_of_jobs():
    pairs = [v for v in calibrate.verdicts() if v.name.startswith("pair")]
    one = calibrate.run(12, seed=5, repeats=(3,), effects=(1.0,), chosen=pairs, jobs=1)
    two = calibrate.run(12, seed=5, repeats=(3,), effects=(1.0,), chosen=pairs, jobs=2)
    assert [r.rates for r in one] == [r.rates for r in two]


def test_the_command_prints_the_table_and_writes_json(tmp_path, capsys):
    out = tmp_path / "calibration.json"
    assert cli.main(["calibrate", "--quick", "--replications", "3", "--jobs", "1", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert printed.splitlines()[0].split()[:3] == ["verdict", "repeats", "effect"]
    assert "leader, train time" in printed and "compare, accuracy" in printed
    data = json.loads(out.read_text())
    assert data["settings"]["replications"] == 3 and len(data["rows"]) == 2 * len(calibrate.verdicts())
    assert set(data["rows"][0]["rates"]) == set(calibrate.OUTCOMES)
