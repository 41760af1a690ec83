"""The conda route holds together (issue 23): every rule names the one environment file, and that
file's header and the README say the same thing about how it is used (one environment, created
once and activated; per-job ``--sdm conda`` deployment not supported)."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
RULES = sorted((ROOT / "workflow" / "rules").glob("*.smk"))


def test_every_job_rule_names_the_one_environment_file():
    for path in RULES:
        text = path.read_text()
        rules = re.split(r"\n(?=(?:rule|checkpoint)\b|    rule:)", text)
        for block in rules[1:]:
            if re.search(r"^\s+(shell|script):", block, re.M):
                found = re.findall(r'conda:\s*\n\s*"([^"]+)"', block)
                assert found == ["../../environment.yml"], (path.name, block[:80])


def test_the_environment_file_and_the_readme_agree():
    env_text = (ROOT / "environment.yml").read_text()
    header = " ".join(line.lstrip("# ") for line in env_text.splitlines() if line.startswith("#"))
    readme = (ROOT / "README.md").read_text()
    for text in (" ".join(header.split()), " ".join(readme.split())):
        assert "(`--sdm conda`) is not supported" in text or \
            "per-job deployment (`--sdm conda`) is not supported" in text, text[:200]
    env = yaml.safe_load(env_text)
    assert env["channels"][:2] == ["conda-forge", "bioconda"]  # snakemake: bioconda
    deps = [d for d in env["dependencies"] if isinstance(d, str)]
    assert any(d.startswith("snakemake") for d in deps)
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    assert "-e ." in pip  # the package from the working tree: one environment, from the root
