"""docs/reproduction.md's evidence from one command (dlbench.evidence): the tables rendered from a hand-made runs table
carry its numbers and their stamp, the doc changes only between its markers, a wrong marker changes nothing; and (long
tier) the command for real, on one framework at a tiny scale."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pandas as pd
import pytest
import yaml

from dlbench.analysis.published import read_published
from dlbench.analysis.summary import framework_effect
from dlbench.evidence import command, markers, study
from dlbench.evidence.render import render
from dlbench.paths import ROOT

COMMIT = "1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b"
MACHINE = {"cpu_model": "AMD EPYC 7B13", "cpu_cores_logical": 2, "cpu_cores_usable": 2, "dlbench_commit": COMMIT,
           "dlbench_dirty": True, "device": "cpu", "threads": 2, "dataset": "fashion_mnist", "contended_pct": 25.0}
# Each framework's own defaults at scale 0.05: (accuracy %, train s, test s, tests during training s, train images,
# validation images, network, length and its unit).
OWN = {"tensorflow": (84.62, 34.0, 1.58, 2.5, 55000, 0, "mnist_deep", 1000, None),
       "caffe": (82.30, 10.3, 1.51, 1.2, 60000, 0, "lenet", 500, None),
       "pytorch": (88.31, 9.0, 0.61, 0.9, 60000, 0, "torch_mnist", None, 1.0),
       "theano": (85.95, 295.5, 1.07, 30.4, 50000, 10000, "lenet5_tanh", None, 10.0)}
# Caffe's LeNet preset on three frameworks, three seeds: accuracy % and train s.
EFFECT = {"caffe": ([82.30, 81.92, 82.40], [12.9, 13.1, 12.5]), "pytorch": ([82.62, 81.99, 82.49], [3.3, 3.4, 3.1]),
          "theano": ([82.49, 82.45, 82.63], [8.2, 8.0, 8.9])}


def make_runs() -> pd.DataFrame:
    rows = []
    for i, (fw, (acc, train, test, during, images, held, net, iters, epochs)) in enumerate(OWN.items()):
        rows.append({**MACHINE, "run_id": f"own-{fw}", "framework": fw, "preset": "own", "network": net,
                     "init": "xavier", "batch_size": {"tensorflow": 50, "caffe": 64, "pytorch": 10, "theano": 500}[fw],
                     "iterations": iters, "epochs": epochs, "seed": 1, "repeat": 0, "status": "ok",
                     "accuracy": acc / 100, "train_time_s": train, "test_time_s": test, "interval_test_time_s": during,
                     "train_samples": images, "validation_samples": held, "studies": "own_defaults",
                     "contended": True, "host_cpu_other_pct_mean": 40.0 + i, "host_load_start": 2.5,
                     "started_at": f"2026-12-03T13:1{i}:00+00:00"})
    for fw, (accs, times) in EFFECT.items():
        for seed, (acc, t) in enumerate(zip(accs, times), start=1):
            rows.append({**MACHINE, "run_id": f"fx-{fw}-{seed}", "framework": fw, "preset": "caffe", "network": "lenet",
                         "cross_apply": None if fw == "caffe" else "preset", "init": "xavier", "batch_size": 64,
                         "learning_rate": 0.01, "iterations": 500, "seed": seed, "repeat": seed - 1, "status": "ok",
                         "accuracy": acc / 100, "train_time_s": t, "test_time_s": 1.0, "train_samples": 60000,
                         "studies": "framework_effect", "contended": False, "host_cpu_other_pct_mean": 3.0,
                         "host_load_start": 0.4, "started_at": "2026-12-03T14:00:00+00:00"})
    return pd.DataFrame(rows)


def row(block: str, first_cell: str) -> list[str]:
    line = next(li for li in block.splitlines() if li.startswith(f"| {first_cell} |"))
    return [c.strip() for c in line.strip("|").split("|")]


def test_own_defaults_table_has_each_frameworks_numbers_the_published_ones_and_its_stamp():
    block = render(make_runs(), 0.05, read_published(), cores=2)["own_defaults"]
    stamp = block.splitlines()[0]
    assert "commit 1a2b3c4-dirty" in stamp and "on 2026-12-03" in stamp and "every length × 0.05" in stamp
    assert "2-core AMD EPYC 7B13" in stamp and "`--cores 2`" in stamp
    assert "4 of 4 ok points trained under outside load" in stamp and "40 to 43 %" in stamp
    published = read_published().set_index(["dataset", "framework", "device"])
    for fw, label in (("pytorch", "PyTorch"), ("theano", "Theano"), ("caffe", "Caffe"), ("tensorflow", "TensorFlow")):
        acc, train, test, during = OWN[fw][:4]
        cells = row(block, label)
        assert cells[5:9] == [f"{acc:.2f}", f"{train:,.1f}", f"{during:,.1f}", f"{test:,.2f}"], cells
        assert cells[9] == "1 ok; 1 under load"
        pub = published.loc[("mnist", "torch" if fw == "pytorch" else fw, "cpu")]
        assert cells[10] == f"{pub.accuracy_pct:.2f} %, {pub.train_time_s:,.0f} s (mnist)"
    # the scaled length beside the preset's own (dlbench/study/presets.yaml), Theano's bounded by its early stopping
    assert row(block, "TensorFlow")[3] == "1,000 of 20,000 iterations, batch 50"
    assert row(block, "PyTorch")[3] == "1 of 20 epochs, batch 10"
    assert row(block, "Theano")[4] == "50,000 + 10,000 validation"


def test_framework_effect_table_has_each_seed_the_means_intervals_and_tests():
    block = render(make_runs(), 0.05, read_published(), cores=2)["framework_effect"]
    assert "0 of 9 ok points trained under outside load" in block.splitlines()[0]
    assert row(block, "seed")[1:] == ["Caffe", "PyTorch", "Theano"]
    for seed in (1, 2, 3):
        assert row(block, str(seed))[1:] == [f"{EFFECT[fw][0][seed - 1]:.2f}" for fw in ("caffe", "pytorch", "theano")]
    # the means are the hand-made values' means; their intervals and tests are framework_effect's, whatever it uses
    runs = make_runs()
    effect = framework_effect(runs[runs["studies"] == "framework_effect"]).set_index("metric")
    for metric, label, spec in (("accuracy_pct", "accuracy %", ".2f"), ("train_time_s", "train s", ",.1f")):
        cells = row(block, f"{label}, mean [95 % interval]")[1:]
        for fw, cell in zip(("caffe", "pytorch", "theano"), cells):
            d = effect.loc[metric, "means"][fw]
            values = EFFECT[fw][0 if metric == "accuracy_pct" else 1]
            assert cell == f"{sum(values) / 3:{spec}} [{d['ci_low']:{spec}}, {d['ci_high']:{spec}}]"
            assert d["ci_low"] < sum(values) / 3 < d["ci_high"]
    accuracy = effect.loc["accuracy_pct"]
    line = next(li for li in block.splitlines() if li.startswith("- test accuracy (caffe 3, pytorch 3, theano 3): "))
    assert accuracy["anova"].text() in line and accuracy["friedman"].text() in line


DOC = """# A page

Words before, kept as they are.
<!-- evidence:own_defaults -->
| an old | table |
<!-- /evidence:own_defaults -->
Words between.

<!-- evidence:framework_effect -->
old numbers
<!-- /evidence:framework_effect -->
Words after.
"""


def outside(text: str) -> str:
    """The text with what lies between each pair of markers left out (the marker lines kept)."""
    return re.sub(r"(<!-- evidence:(\w+) -->\n).*?(<!-- /evidence:\2 -->)", r"\1\3", text, flags=re.S)


def test_rewriting_the_doc_changes_only_the_lines_between_its_markers(tmp_path):
    doc = tmp_path / "doc.md"
    doc.write_text(DOC)
    blocks = render(make_runs(), 0.05, read_published())
    markers.rewrite(doc, blocks)
    new = doc.read_text()
    assert outside(new) == outside(DOC)
    for name, block in blocks.items():
        between = new.split(f"<!-- evidence:{name} -->\n")[1].split(f"<!-- /evidence:{name} -->")[0]
        assert between == f"\n{block}\n\n"
        assert "commit 1a2b3c4-dirty" in between
    assert "old numbers" not in new and "| an old | table |" not in new
    markers.rewrite(doc, blocks)  # again: the same text
    assert doc.read_text() == new


@pytest.mark.parametrize("broken", [DOC.replace("<!-- /evidence:own_defaults -->\n", ""),
                                    DOC + "<!-- evidence:framework_effect -->\n"])
def test_a_missing_or_doubled_marker_is_one_line_and_the_doc_stays_as_it_was(tmp_path, capsys, broken):
    doc = tmp_path / "doc.md"
    doc.write_bytes(broken.encode())
    workdir = tmp_path / "work"  # a finished run's folder: the markers are checked before anything else
    (workdir / "results").mkdir(parents=True)
    make_runs().to_parquet(workdir / study.RUNS)
    (workdir / study.RUN_INFO).write_text('{"scale": 0.05, "cores": 2, "wall_s": 60}')
    assert command.main(["--render-only", "--workdir", str(workdir), "--doc", str(doc)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and err.startswith(f"dlbench evidence: {doc} has ")
    assert doc.read_bytes() == broken.encode()
    # and the same folder with a sound doc renders
    doc.write_text(DOC)
    assert command.main(["--render-only", "--workdir", str(workdir), "--doc", str(doc)]) == 0
    assert "commit 1a2b3c4-dirty" in doc.read_text()


@pytest.mark.long
def test_the_command_runs_the_study_in_its_own_folder_and_writes_the_doc(tmp_path):
    """config/evidence.yaml on PyTorch alone at scale 0.01: 6 real points (40 s on 2 cores)."""
    cfg = yaml.safe_load(study.CONFIG.read_text())
    cfg["frameworks"] = ["pytorch"]
    (tmp_path / "evidence.yaml").write_text(yaml.safe_dump(cfg))
    doc = tmp_path / "doc.md"
    doc.write_text(DOC)
    proc = subprocess.run([sys.executable, "-m", "dlbench.evidence", "--scale", "0.01", "--cores", "2", "--workdir",
                           str(tmp_path / "work"), "--configfile", str(tmp_path / "evidence.yaml"), "--doc", str(doc)],
                          cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert not (tmp_path / "results").exists() and (tmp_path / "work" / study.RUNS).exists()
    runs = pd.read_parquet(tmp_path / "work" / study.RUNS)
    assert len(runs) == 6 and set(runs["status"]) == {"ok"}
    text = doc.read_text()
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True,
                          timeout=20).stdout.strip()
    assert f"commit {head[:7]}" in text and "every length × 0.01" in text
    own = text.split("<!-- evidence:own_defaults -->")[1]
    cells = row(own, "PyTorch")
    accuracy = runs[runs["studies"].str.contains("own_defaults")]["accuracy"].iloc[0] * 100
    assert cells[5] == f"{accuracy:.2f}" and cells[3] == "0.2 of 20 epochs, batch 10"
    effect = text.split("<!-- evidence:framework_effect -->")[1]
    assert [row(effect, str(seed))[1] != "-" for seed in range(1, 6)] == [True] * 5
    assert "tests nothing here" in effect  # one framework: nothing to compare it with


def test_render_only_after_a_failed_run_stamps_the_table_with_its_own_scale(tmp_path, capsys):
    """A run at scale 0.5 that fails (a real Snakemake, refused config) leaves the last finished run's table and
    scale (0.05) as they were: --render-only stamps that table with 0.05, never with the failed run's 0.5."""
    workdir = tmp_path / "work"
    (workdir / "results").mkdir(parents=True)
    make_runs().to_parquet(workdir / study.RUNS)
    study.record_finished(workdir, {"scale": 0.05, "cores": 2, "wall_s": 60, "returncode": 0})
    broken = tmp_path / "broken.yaml"
    broken.write_text("datasets: [digits]\nframworks: [pytorch]\n")
    with pytest.raises(study.StudyFailed):
        study.run(workdir, broken, scale=0.5, cores=1, timeout_s=300)
    assert json.loads((workdir / study.FAILED_INFO).read_text())["scale"] == 0.5
    doc = tmp_path / "doc.md"
    doc.write_text(DOC)
    assert command.main(["--render-only", "--workdir", str(workdir), "--doc", str(doc)]) == 0
    text = doc.read_text()
    assert "every length × 0.05 (`--scale 0.05`)" in text and "× 0.5 " not in text
    # a runs table that another run changed since its info was written: its scale is unknown, refused in one line
    make_runs().head(4).to_parquet(workdir / study.RUNS)
    capsys.readouterr()
    assert command.main(["--render-only", "--workdir", str(workdir), "--doc", str(doc)]) == 1
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "is not the table the run of" in line and doc.read_text() == text
