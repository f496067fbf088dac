"""The untimed step a GPU point takes in its compile phase (stepped.warms_up) changes nothing it trains.

No GPU here: the same step is forced on a CPU point, where it runs the same code (the optimizer at
learning rate 0, its state and the random state put back; JAX's result dropped), and the point then
trains to the same weights, losses and accuracy, bit for bit, as without it.
"""

import json
import subprocess

import pytest

from dlbench.frameworks import registry
from dlbench.paths import ROOT as REPO
from dlbench.study.sweep import one_point

FRAMEWORKS = [f.name for f in registry.FRAMEWORKS.values() if f.accepts.get("compile")]

TWICE = """
import importlib, json, sys, tempfile
import numpy as np
from dlbench.frameworks import base
point, data = json.loads(sys.argv[1]), sys.argv[2]
adapter_module = importlib.import_module("dlbench.frameworks." + point["framework"])
out, asked = {}, []
for warm in (False, True):
    adapter_module.warms_up = lambda p, warm=warm: asked.append(warm) or warm
    with tempfile.NamedTemporaryFile(suffix=".jsonl") as events:
        adapter = adapter_module.ADAPTER(point, data, base.Reporter(events.name))
        result = adapter.run()
    out[str(warm)] = {"loss": result["final_loss"], "test_loss": result["test_loss"], "accuracy": result["accuracy"],
                      "weights": [float(np.abs(a).sum()) for pair in adapter.weights() for a in pair]}
print(json.dumps({"runs": out, "asked": asked}))
"""


@pytest.mark.long
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_the_untimed_step_leaves_the_training_as_it_was(env_python, digits_dir, framework):
    # momentum and a moving average: state the untimed step must not leave behind; dropout-free LeNet, own seed
    point = one_point(framework, "caffe", iterations=25, batch_size=32, threads=1)
    point.update(ema_decay=0.9)
    proc = subprocess.run([env_python(framework), "-c", TWICE, json.dumps(point), str(digits_dir)], cwd=REPO,
                          env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "CUDA_VISIBLE_DEVICES": ""},
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    found = json.loads(proc.stdout.splitlines()[-1])
    assert found["asked"] == [False, True]  # each compile phase asked once, and the second took the step
    plain, warmed = found["runs"]["False"], found["runs"]["True"]
    assert plain["accuracy"] > 0.3  # it trained
    assert warmed == plain
