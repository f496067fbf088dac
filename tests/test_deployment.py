"""What the Snakemake workflow catalog and a deployment read: the catalog file, the licence, the citation,
the package's dependencies, and a deployment made by snakedeploy from a local clone that plans the default study."""

import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

from dlbench.paths import ENVS, ROOT
from dlbench.study import config, sweep
from dlbench.testing.sandbox import copy_workflow, snakemake

SNAKEDEPLOY = Path(sys.executable).with_name("snakedeploy")
STUDY_AUTHORS = ["Yanzhao Wu", "Ling Liu", "Calton Pu", "Wenqi Cao", "Semih Sahin", "Wenqi Wei", "Qi Zhang"]


def base_pins() -> dict[str, str]:
    lines = [ln.strip() for ln in (ENVS / "base.txt").read_text().splitlines() if ln.strip() and ln[0] != "#"]
    return {re.split(r"[=<>!~]", ln, maxsplit=1)[0].lower(): ln for ln in lines}


def test_the_package_declares_the_base_environments_pins():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = [*project["dependencies"], *project["optional-dependencies"]["test"]]
    assert sorted(declared) == sorted(base_pins().values())  # the same packages, at the same versions
    assert "snakemake==9.27.1" in project["dependencies"] and "pytest==9.2.0" not in project["dependencies"]
    assert project["license"] == "MIT" and (ROOT / "LICENSE").read_text().startswith("MIT License")


def test_the_citation_names_dlbench_and_the_study():
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    assert cff["cff-version"] == "1.2.0" and cff["type"] == "software" and "dlbench" in cff["title"]
    assert cff["message"] and cff["authors"] and cff["license"] == "MIT"
    study = next(r for r in cff["references"] if r["type"] == "article")
    assert [f"{a['given-names']} {a['family-names']}" for a in study["authors"]] == STUDY_AUTHORS
    assert study["journal"] == "IEEE Transactions on Services Computing" and study["year"] == 2019
    assert study["doi"] == "10.1109/TSC.2019.2928551"
    assert "arXiv:1810.12210" in [i["value"] for i in study["identifiers"]]


def test_the_catalog_file_says_how_to_run_it():
    usage = yaml.safe_load((ROOT / ".snakemake-workflow-catalog.yml").read_text())["usage"]
    assert "--cores" in usage["mandatory-flags"]["flags"] and usage["mandatory-flags"]["desc"]
    # the conda files were never solved by conda: the catalog declares no deployment it has not seen work, and says
    # how the environments are built instead
    assert not any(usage["software-stack-deployment"].values())
    assert "builds each framework's environment itself" in usage["mandatory-flags"]["desc"]
    assert usage["report"] is True
    # what the catalog looks for: the Snakefile where it looks, the schema, the config explained
    for path in ("workflow/Snakefile", "workflow/schemas/config.schema.yaml", "config/README.md",
                 "config/config.yaml", "workflow/report/workflow.rst"):
        assert (ROOT / path).is_file(), path
    assert re.search(r'^report: "report/workflow.rst"$', (ROOT / "workflow/Snakefile").read_text(), re.M)


@pytest.mark.skipif(not SNAKEDEPLOY.exists(), reason="snakedeploy is not installed beside this Python "
                                                     "(envs/base.txt has it: bash scripts/setup.sh)")
def test_snakedeploy_from_a_local_clone_gives_a_deployment_that_plans_the_default_study(tmp_path):
    clone = copy_workflow(tmp_path / "clone")
    for name in ("LICENSE", "CITATION.cff", "pyproject.toml", ".snakemake-workflow-catalog.yml"):
        shutil.copy(ROOT / name, clone / name)
    dest = tmp_path / "deployment"
    # a local clone is copied as it is: the branch names what a clone of the repository would check out
    proc = subprocess.run([str(SNAKEDEPLOY), "deploy-workflow", str(clone), str(dest), "--branch", "main",
                           "--name", "dlbench"], capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    # snakedeploy copies the config, the profiles and the licence, and writes a Snakefile that uses dlbench as a module
    assert (dest / "config/config.yaml").read_text() == (ROOT / "config/config.yaml").read_text()
    assert (dest / "profiles/default/config.yaml").is_file() and (dest / "LICENSE").is_file()
    snakefile = dest / "workflow/Snakefile"
    text = snakefile.read_text()
    assert re.search(r"^module \w+:", text, re.M) and re.search(r"^use rule \* from \w+", text, re.M)
    # snakedeploy 0.17's local provider names the module's Snakefile relative to the repository
    # ("workflow/Snakefile"), which Snakemake resolves beside the deployment's own Snakefile; point it at
    # the clone, as a deployment from GitHub points at github(...)
    declared = re.search(r'snakefile:\s*\n\s*"([^"]+)"', text).group(1)
    if not (snakefile.parent / declared).is_file():
        snakefile.write_text(text.replace(f'"{declared}"', f'"{clone / "workflow/Snakefile"}"'))
    out = snakemake(dest, "-n").stdout
    study = config.validate(yaml.safe_load((ROOT / "config/config.yaml").read_text()))
    points = len(sweep.plan(study).points)
    assert re.search(rf"^train\s+{points}$", out, re.M), out[-2000:]
    assert re.search(r"^all\s+1$", out, re.M)
    assert (dest / ".snakemake").is_dir() and not (clone / "results").exists()


def test_a_config_string_in_the_report_is_shown_as_text_never_as_markup_or_a_link():
    # The report's text renders the config as Snakemake does (its Jinja environment, then docutils); a value
    # that closes an inline literal used to become a live `javascript:` link
    import docutils.core
    import jinja2

    class Snakemake:
        config = {"datasets": ["digits"], "note": "x`` `click <javascript:alert(1)>`_ ``y", "seed": 1}

    env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True)  # snakemake.report's own settings
    text = env.from_string((ROOT / "workflow/report/workflow.rst").read_text()).render(
        snakemake=Snakemake, categories={}, files={})
    html = docutils.core.publish_parts(text, writer_name="html")["html_body"]
    assert "href=\"javascript" not in html and "<a " not in html.split("The config that ran")[1]
    block = html.split("The config that ran")[1]
    assert '&quot;datasets&quot;: [&quot;digits&quot;]' in block and '&quot;seed&quot;: 1' in block
    assert "&quot;note&quot;: &quot;x`` `click" in block  # the string itself, shown as it is
