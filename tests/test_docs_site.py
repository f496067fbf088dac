"""The documentation site: docs/*.md built by MkDocs with warnings as errors, its generated pages current, and the
README's front door true to the scripts it names."""

import re
import shutil
import subprocess
import sys

import pytest
import yaml

from dlbench import cli
from dlbench.docgen import DOCS, MKDOCS, site_search
from dlbench.paths import ROOT
from dlbench.testing.browser import CHROMIUM, MISSING, chromium

pytest.importorskip("mkdocs", reason="mkdocs is a test tool (envs/base.txt): bash scripts/setup.sh")


def build(config, site, cwd=ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(config),
                           "--site-dir", str(site)], cwd=cwd, capture_output=True, text=True, timeout=300)


THEME = "dlbench/docgen"  # mkdocs.yml's theme.custom_dir and hooks live here
GROUPS = {"Using dlbench", "Reference", "Developing dlbench"}


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
        shutil.copytree(ROOT / THEME, root / THEME)  # the search's page script and its hook, as mkdocs.yml names
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


def test_the_nav_is_in_groups_using_reference_developing():
    nav = yaml.safe_load(MKDOCS.read_text())["nav"]
    titles = [next(iter(item)) for item in nav]
    assert titles == ["Home", "Using dlbench", "Reference", "Developing dlbench"], titles
    groups = {next(iter(item)): [next(iter(p.values())) for p in next(iter(item.values()))] for item in nav[1:]}
    assert {"usage.md", "studies.md", "findings.md"} <= set(groups["Using dlbench"])
    assert {"config.md", "record.md", "changelog.md"} <= set(groups["Reference"])
    assert {"layout.md", "testing.md", "performance.md"} <= set(groups["Developing dlbench"])
    # the front page lists every page under the group the nav puts it in
    front = (DOCS / "index.md").read_text()
    for group, pages in groups.items():
        section = front.split(f"**{group}**")[1].split("\n**")[0]
        assert sorted(re.findall(r"\]\(([\w-]+\.md)\)", section)) == sorted(pages), group


def test_the_front_page_holds_the_two_commands_and_what_a_first_run_gives():
    front = (DOCS / "index.md").read_text()
    readme = (ROOT / "README.md").read_text()
    block = re.compile(r"## The two commands.*?```sh\n(.*?)```", re.S)
    assert block.search(front).group(1) == block.search(readme).group(1)  # the README's two lines, as it has them
    assert "README" not in front  # the front door itself, not a pointer to another
    first = front.split("## What a first run gives")[1].split("## These pages")[0]
    for what in ("index.html", "findings.md", "charts/", "runs.parquet", "summary.parquet", "metrics.json",
                 "28 points", "points done"):
        assert what in first, what
    config = yaml.safe_load((ROOT / "config/config.yaml").read_text())
    assert config["repeats"] == 4 and "four seeds each" in first  # the default study, as the config has it


def test_the_built_search_needs_no_worker_and_no_request():
    script = (ROOT / THEME / "theme/search/main.js").read_text()
    assert "Worker(" not in script and "XMLHttpRequest" not in script and "fetch(" not in script
    assert f'var INDEX = "{site_search.VARIABLE}"' in script


@pytest.mark.skipif(CHROMIUM is None, reason=MISSING)
def test_the_search_works_where_the_site_is_opened_from_the_file_system(tmp_path):
    site = tmp_path / "site"
    proc = build(MKDOCS, site)
    assert proc.returncode == 0, proc.stderr[-3000:]
    index = (site / "search" / "search_index.js").read_text()
    assert index.startswith(f"var {site_search.VARIABLE} = ") and '"location": "usage.html"' in index
    # as a reader opens it: file://, no flag that lets a file read another (MkDocs' own search fails here)
    page = (site / "index.html").as_uri() + "?q=benjamini"
    dom = chromium(tmp_path / "profile", "--virtual-time-budget=10000", "--dump-dom", page).stdout
    results = re.search(r'<div id="mkdocs-search-results"[^>]*>(.*?)</div>', dom, re.S)
    assert results, dom[-2000:]
    found = re.findall(r'<a href="\./([\w-]+\.html)[^"]*">', results.group(1))
    assert "usage.html" in found and "findings.html" in found, results.group(1)[:2000]


def test_the_catalog_says_only_what_is_so():
    catalog = yaml.safe_load((ROOT / ".snakemake-workflow-catalog.yml").read_text())
    environments = " ".join((DOCS / "environments.md").read_text().split())
    # conda support declared only once the conda files have been solved
    unsolved = "these files have not been solved there" in environments
    assert catalog["usage"]["software-stack-deployment"]["conda"] is not unsolved
    # Caffe's build takes the same time wherever it is said
    said = {name: re.findall(r"Caffe[^.]*?about (\d+) minutes", " ".join(text.split()))
            for name, text in [("README.md", (ROOT / "README.md").read_text()), ("environments.md", environments),
                               ("catalog", catalog["usage"]["mandatory-flags"]["desc"])]}
    assert all(len(found) == 1 for found in said.values()) and len({f[0] for f in said.values()}) == 1, said
