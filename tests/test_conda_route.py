"""The conda route holds together (issue 23): the workflow runs in one environment, so no rule
declares a per-job one, and the environment file's header and the README say the same thing about
how it is used (one environment, created once and activated; per-job ``--sdm conda`` deployment
not supported)."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
RULES = sorted((ROOT / "workflow" / "rules").glob("*.smk"))


def test_no_rule_declares_a_per_job_environment():
    """The workflow runs in one environment (the Snakefile imports bnstudy): a rule's ``conda:``
    or ``container:`` would promise a per-job deployment that is not supported."""
    for path in [ROOT / "Snakefile", *RULES]:
        found = re.findall(r"^\s*(conda|container|singularity):", path.read_text(), re.M)
        assert found == [], (path.name, found)


def test_the_environment_file_and_the_readme_agree():
    env_text = (ROOT / "environment.yml").read_text()
    header = " ".join(line.lstrip("# ") for line in env_text.splitlines() if line.startswith("#"))
    readme = (ROOT / "README.md").read_text()
    for text in (" ".join(header.split()), " ".join(readme.split())):
        assert "declare no `conda:` environment" in text, text[:200]
        assert "(`--sdm conda`)" in text and "is not supported" in text, text[:200]
    env = yaml.safe_load(env_text)
    assert env["channels"][:2] == ["conda-forge", "bioconda"]  # snakemake: bioconda
    deps = [d for d in env["dependencies"] if isinstance(d, str)]
    assert any(d.startswith("snakemake") for d in deps)
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    assert "-e ." in pip  # the package from the working tree: one environment, from the root
