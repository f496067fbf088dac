"""docs/config.md is the schema's descriptions laid out: every key there, none missing, none stale."""

import copy

from dlbench.docgen import config_keys
from dlbench.paths import SCHEMA
from dlbench.study.config import load_schema


def test_the_config_page_is_what_the_schema_writes():
    assert config_keys.PAGE.read_text() == config_keys.render(), "run `dlbench docs`"
    assert config_keys.main(["--check"]) == 0


def test_every_key_of_the_schema_has_a_description_and_a_row():
    assert config_keys.undescribed() == []
    rows = {line.split("|")[1].strip().strip("`") for line in config_keys.PAGE.read_text().splitlines()
            if line.startswith("| `")}
    for path in ("datasets", "sweep.batch_size", "sweep.precision", "presets.<name>.lr_policy.name",
                 "presets.<name>.input.crop", "studies.<name>.sweep", "envs.site", "limits.hang_s",
                 "measurement.lock_timeout_s", "cluster.gpu_model"):
        assert path in rows, path
    # the rows are the schema's keys, one each
    assert len(rows) == len(list(config_keys.keys()))
    # a row says the allowed values, the default and the schema's words
    line = next(ln for ln in config_keys.PAGE.read_text().splitlines() if ln.startswith("| `measurement.gpu` |"))
    assert "`per_device`, `exclusive`" in line and '`"per_device"`' in line and "free GPU" in line


def test_a_new_key_without_a_description_or_an_edited_one_is_caught(tmp_path):
    schema = load_schema(SCHEMA)
    bare = copy.deepcopy(schema)
    bare["properties"]["sweep"]["properties"]["dropout"] = {"type": "array", "items": {"type": "number"}}
    assert config_keys.undescribed(bare) == ["sweep.dropout"]
    edited = copy.deepcopy(schema)
    edited["properties"]["seed"]["description"] = "the base random seed, changed"
    out = tmp_path / "config.md"
    out.write_text(config_keys.render())
    assert config_keys.main(["--check", "--out", str(out)]) == 0
    out.write_text(config_keys.render(edited))
    assert config_keys.main(["--check", "--out", str(out)]) == 1
