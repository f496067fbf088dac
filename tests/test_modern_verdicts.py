"""Does the framework matter for the modern networks? The verdicts' tests per network, on hand-made runs whose
right answer is known: ResNet-20 twice as slow in one framework, the vision transformer alike in all three."""

import pandas as pd

from dlbench.analysis import guidance, summary
from dlbench.present import findings
from dlbench.testing import study

# seconds per seed (1, 2, 3): JAX's ResNet-20 takes twice as long; the transformer's times are one noise
TIMES = {
    ("resnet20", "resnet"): {"pytorch": [10.0, 10.3, 9.8], "tensorflow": [10.1, 9.9, 10.2], "jax": [20.2, 20.6, 19.9]},
    ("vit_mini", "vit"): {"pytorch": [6.0, 6.2, 5.9], "tensorflow": [6.1, 6.0, 6.2], "jax": [6.0, 6.1, 6.0]},
}


def modern_runs() -> pd.DataFrame:
    rows = []
    for (network, preset), per in TIMES.items():
        for fw, times in per.items():
            for seed, t in enumerate(times, start=1):
                rows.append({"run_id": f"{fw}-{network}-{seed}", "framework": fw, "dataset": "fashion_mnist",
                             "preset": preset, "cross_apply": "preset", "network": network, "device": "cpu",
                             "optimizer": "adamw" if preset == "vit" else "sgd", "batch_size": 128,
                             "learning_rate": 1e-3, "iterations": 300, "threads": 2, "library": "default",
                             "compile": "eager", "precision": "fp32", "seed": seed, "repeat": seed - 1,
                             "status": "ok", "train_time_s": t, "test_time_s": 0.5,
                             "accuracy": 0.85 + 0.001 * seed, "throughput_img_s": 300 * 128 / t,
                             "rss_peak_mb": 900.0, "cpu_util_mean_pct": 190.0, "threads_in_effect": 2})
    return pd.DataFrame(rows)


def test_the_framework_effect_is_answered_for_each_modern_network():
    effect = summary.framework_effect(modern_runs())
    times = effect[effect["metric"] == "train_time_s"].set_index("network")
    assert set(times.index) == {"resnet20", "vit_mini"}
    assert times.loc["resnet20", "verdict"] == "differ"
    assert times.loc["resnet20", "test_p"] < 0.001
    assert times.loc["vit_mini", "verdict"] != "differ"  # three seeds of one noise: no difference claimed
    assert set(times.loc["vit_mini", "means"]) == {"pytorch", "tensorflow", "jax"}


def test_the_findings_say_it_per_network_and_the_guidance_tables_hold_both():
    runs = modern_runs()
    text = findings.render(runs, study.make_curves(runs))
    section = text.split("## Does the framework matter?")[1].split("\n## ")[0]
    lines = [line for line in section.splitlines() if line.startswith("- ") and "training time" in line]
    assert len(lines) == 2
    assert any("resnet" in line and "**the frameworks differ**" in line for line in lines), lines
    assert any("vit" in line and "**the frameworks differ**" not in line for line in lines), lines
    # the provider's table: each network's throughput per core, for every framework that ran it
    table = guidance.efficiency(runs)
    per_network = table.groupby(table["settings"].str.split("'s preset").str[0])["framework"].agg(set)
    everyone = {"pytorch", "tensorflow", "jax"}
    assert per_network.to_dict() == {"resnet": everyone, "vit": everyone}
    jax = table[(table["framework"] == "jax") & table["settings"].str.startswith("resnet")]
    assert jax["img_s_per_core"].iloc[0] < 0.6 * table[table["framework"] == "pytorch"]["img_s_per_core"].min()
