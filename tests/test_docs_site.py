"""The documentation site: docs/*.md built by MkDocs with warnings as errors, its generated pages current, and the
README's front door true to the scripts it names."""

import re
import shutil
import subprocess
import sys

import pytest
import yaml

from dlbench import cli
from dlbench.docgen import DOCS, MKDOCS
from dlbench.paths import ROOT

pytest.importorskip("mkdocs", reason="mkdocs is a test tool (envs/base.txt): bash scripts/setup.sh")


def build(config, site, cwd=ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(config),
                           "--site-dir", str(site)], cwd=cwd, capture_output=True, text=True, timeout=300)


def nav_pages(config=MKDOCS) -> list[str]:
    def walk(items):
        for item in items:
            value = next(iter(item.values())) if isinstance(item, dict) else item
            yield from walk(value) if isinstance(value, list) else [value]
    return list(walk(yaml.safe_load(config.read_text())["nav"]))


def test_the_generated_pages_are_current():
    assert cli.main(["docs", "--check"]) == 0, "run `dlbench docs`"


def test_the_nav_lists_every_page_once():
    pages = nav_pages()
    assert sorted(pages) == sorted(p.name for p in DOCS.glob("*.md")) and len(pages) == len(set(pages))
    assert pages[0] == "index.md"


def test_the_site_builds_with_warnings_as_errors(tmp_path):
    assert cli.main(["docs", "--check"]) == 0, "run `dlbench docs`"  # so that --site below writes nothing new
    site = tmp_path / "site"
    assert cli.main(["docs", "--site", str(site)]) == 0
    for page in nav_pages():
        assert (site / page.replace(".md", ".html")).is_file(), page
    record = (site / "record.html").read_text()
    assert "<td><code>rss_peak_mb</code></td>" in record and "the highest resident memory read" in record
    assert "<td><code>throughput_img_s</code></td>" in record and "images/s" in record
    config = (site / "config.html").read_text()
    assert "<td><code>measurement.lock_timeout_s</code></td>" in config
    assert "<td><code>sweep.batch_size</code></td>" in config
    # a link between pages is a link in the site, its anchor a heading there
    usage = (site / "usage.html").read_text()
    assert 'href="record.html"' in usage and 'href="faults.html"' in usage
    assert 'id="what-a-run-leaves"' in usage and 'href="usage.html#what-a-run-leaves"' in (
        site / "record.html").read_text()
    # offline: no page loads anything from elsewhere
    for page in site.rglob("*.html"):
        assert not re.search(r'<(script|link)[^>]+(src|href)="https?://', page.read_text()), page.name


def test_a_site_folder_of_the_users_own_is_refused_and_kept(tmp_path, capsys):
    site = tmp_path / "www"
    site.mkdir()
    (site / "notes.txt").write_text("mine")
    assert cli.main(["docs", "--site", str(site)]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert str(site) in line and "would delete them" in line
    assert (site / "notes.txt").read_text() == "mine" and len(list(site.iterdir())) == 1


def test_a_broken_link_a_missing_anchor_or_a_page_left_out_of_the_nav_fails_the_build(tmp_path):
    def copy() -> tuple:
        root = tmp_path / f"c{len(list(tmp_path.iterdir()))}"
        shutil.copytree(DOCS, root / "docs")
        shutil.copy(MKDOCS, root / "mkdocs.yml")
        return root, root / "mkdocs.yml"

    root, config = copy()
    assert build(config, root / "site", cwd=root).returncode == 0  # the copy builds as the checkout does
    root, config = copy()
    (root / "docs/usage.md").write_text((root / "docs/usage.md").read_text() + "\n[gone](no_such_page.md)\n")
    proc = build(config, root / "site", cwd=root)
    assert proc.returncode != 0 and "no_such_page.md" in proc.stderr
    root, config = copy()
    (root / "docs/usage.md").write_text((root / "docs/usage.md").read_text() + "\n[gone](record.md#no-such-field)\n")
    proc = build(config, root / "site", cwd=root)
    assert proc.returncode != 0 and "no-such-field" in proc.stderr
    root, config = copy()
    (root / "docs/orphan.md").write_text("# Orphan\n")
    proc = build(config, root / "site", cwd=root)
    assert proc.returncode != 0 and "orphan.md" in proc.stderr


def test_the_readme_is_a_front_door_true_to_the_scripts():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 220
    commands = re.search(r"## The two commands.*?```sh\n(.*?)```", readme, re.S).group(1)
    assert [line.split("#")[0].strip() for line in commands.splitlines()] == [
        "bash scripts/study.sh", "bash scripts/test.sh"]
    study, test = (ROOT / "scripts/study.sh").read_text(), (ROOT / "scripts/test.sh").read_text()
    assert "bash scripts/setup.sh" in study and re.search(r'^exec \.venv/bin/snakemake --cores "\$\(nproc\)" "\$@"$',
                                                           study, re.M)
    assert "bash scripts/setup.sh" in test and '-m "not long"' in test and "--long" in test
    assert re.search(r"^exec bash scripts/test\.sh\b", (ROOT / ".ci/run").read_text(), re.M)  # CI runs the same
    # every page the README links to exists, and every page of the site is on its map
    linked = set(re.findall(r"\]\(docs/([\w.-]+\.md)", readme))
    assert linked == {p.name for p in DOCS.glob("*.md")} - {"index.md"}
    for image in re.findall(r"!\[[^]]*\]\(([^)]+)\)", readme):
        assert (ROOT / image).is_file(), image
