"""The aggregation into Parquet: with its cache of parsed CSVs, the same files as a full reading, parsing only
what is new or changed."""

import json
import shutil

import pyarrow.parquet as pq
import pytest

from dlbench.aggregate import collect
from dlbench.testing import study

TABLES = ("runs", "curves", "samples")


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """40 run folders of the large hand-made study: CPU and GPU points (so CSV schemas differ), failures."""
    root = tmp_path_factory.mktemp("runs")
    return root, study.write_large_study(root, 40)


def aggregate(out, paths, cache=None):
    out.mkdir(parents=True, exist_ok=True)
    collect.aggregate(paths, *(out / f"{t}.parquet" for t in TABLES), membership={}, cache=cache)
    return {t: pq.read_table(out / f"{t}.parquet") for t in TABLES}


def assert_same_files(a: dict, b: dict) -> None:
    for t in TABLES:
        assert a[t].schema.equals(b[t].schema, check_metadata=True), t  # column types, pandas' dtypes included
        assert a[t].equals(b[t]), t


def counting_reads(monkeypatch) -> list:
    parsed = []
    real = collect._read_csv

    def read(path, facts=None):
        parsed.append(path)
        return real(path, facts)

    monkeypatch.setattr(collect, "_read_csv", read)
    return parsed


def test_adding_points_parses_only_theirs_and_gives_the_files_of_a_full_aggregation(folders, tmp_path, monkeypatch):
    root, paths = folders
    cache = tmp_path / "cache"
    aggregate(tmp_path / "first", paths[:30], cache)
    parsed = counting_reads(monkeypatch)
    incremental = aggregate(tmp_path / "inc", paths, cache)
    assert len(parsed) == 2 * 10  # each new record's curve.csv and samples.csv, nothing else
    assert {p.parent for p in parsed} == {p.parent for p in paths[30:]}
    monkeypatch.undo()
    full = aggregate(tmp_path / "full", paths)
    assert_same_files(incremental, full)
    assert len(set(full["samples"].schema.names)) > 5 and full["runs"].num_rows == 40
    # a second aggregation with nothing new parses nothing and writes the same again
    parsed = counting_reads(monkeypatch)
    assert_same_files(aggregate(tmp_path / "again", paths, cache), full)
    assert parsed == []


def test_a_rerun_point_and_a_lost_cache_are_read_again(folders, tmp_path, monkeypatch):
    root, paths = folders
    cache = tmp_path / "cache"
    copy = tmp_path / "runs"
    shutil.copytree(root, copy)
    paths = [copy / p.relative_to(root) for p in paths]
    aggregate(tmp_path / "first", paths, cache)
    # the point ran again: a new record, a new curve
    record = json.loads(paths[3].read_text())
    paths[3].write_text(json.dumps({**record, "accuracy": 0.5, "started_at": "2026-12-02T00:00:00+0000"}))
    curve = paths[3].parent / "curve.csv"
    curve.write_text("\n".join(curve.read_text().splitlines()[:5]) + "\n")
    parsed = counting_reads(monkeypatch)
    after = aggregate(tmp_path / "after", paths, cache)
    assert {p.parent for p in parsed} == {paths[3].parent}
    monkeypatch.undo()
    assert_same_files(after, aggregate(tmp_path / "full", paths))
    assert after["curves"].to_pandas()["run_id"].tolist().count(record["id"]) == 4
    # a cache whose shards are gone is rebuilt from the run folders
    for shard in cache.glob("*.arrow"):
        shard.unlink()
    assert_same_files(aggregate(tmp_path / "rebuilt", paths, cache), aggregate(tmp_path / "full2", paths))


def test_records_that_left_the_study_are_dropped_from_the_cache(folders, tmp_path):
    root, paths = folders
    cache = tmp_path / "cache"
    aggregate(tmp_path / "all", paths, cache)
    before = sum(shard.stat().st_size for shard in cache.glob("*.arrow"))
    aggregate(tmp_path / "few", paths[:5], cache)  # the study shrank to 5 points: only their tables stay
    index = json.loads((cache / "index.json").read_text())
    assert set(index["entries"]) == {collect.record_key(p, collect.CSVS) for p in paths[:5]}
    after = sum(shard.stat().st_size for shard in cache.glob("*.arrow"))
    assert 0 < after < before / 3
    assert_same_files(aggregate(tmp_path / "few2", paths[:5], cache), aggregate(tmp_path / "full", paths[:5]))
