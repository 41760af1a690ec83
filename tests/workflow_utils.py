"""Helpers for tests that run Snakemake on a copy of the workflow with a tiny config."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
SNAKEMAKE = [sys.executable, "-m", "snakemake"]


def copy_workflow(dest: Path) -> Path:
    """Copy Snakefile, workflow/, config/ and src/ into ``dest`` (the code hashes read src/)."""
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copy(REPO / "Snakefile", dest / "Snakefile")
    for d in ("workflow", "config", "src"):
        shutil.copytree(REPO / d, dest / d, ignore=shutil.ignore_patterns("__pycache__"),
                        dirs_exist_ok=True)
    shutil.copy(REPO / "environment.yml", dest / "environment.yml")
    return dest


def tiny_config(**overrides) -> dict:
    """The default config shrunk: star2d MLP (2 norms x 2 seeds) and a small DLN (1 run)."""
    cfg = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    cfg["datasets"] = {
        "star2d": {"kind": "star2d", "options": {"n_train": 64, "n_test": 64, "seed": 0}},
        "gaussian_linear": {"kind": "gaussian_linear",
                            "options": {"n_train": 64, "n_test": 64, "dim": 4, "seed": 0}},
    }
    cfg["models"] = {"mlp": {"arch": "mlp", "depth": 3, "width": 16},
                     "dln": {"arch": "dln", "depth": 4, "init": "xavier"}}
    cfg["trainings"] = {
        "sgd": {"lr": 0.05, "momentum": 0.9, "batch_size": 16, "steps": 20, "eval_every": 5,
                "checkpoints": [0, 1, 10]},
        "gd": {"lr": 0.01, "batch_size": "full", "steps": 20, "eval_every": 5,
               "checkpoints": [0, 1, 10]},
    }
    cfg["experiments"] = {
        "star": {"dataset": "star2d", "model": "mlp", "training": "sgd",
                 "norms": ["none", "batchnorm"], "seeds": [0, 1]},
        "dln": {"dataset": "gaussian_linear", "model": "dln", "training": "gd",
                "norms": ["batchnorm"], "seeds": [0]},
    }
    cfg["analyses"] = {"dannemann": {"n_inits": 2, "steps": 300, "steps_plain": 300,
                                     "n_angles": 360}}
    cfg.update(overrides)
    return cfg


def write_config(path: Path, cfg: dict) -> Path:
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


def snakemake(workdir: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    out = subprocess.run([*SNAKEMAKE, *args], cwd=workdir, capture_output=True, text=True)
    if check and out.returncode != 0:
        raise AssertionError(f"snakemake {' '.join(args)} failed:\n{out.stdout}\n{out.stderr}")
    return out


def planned_jobs(workdir: Path, *args: str) -> dict[str, int]:
    """Rule -> number of jobs a dry run would execute."""
    out = snakemake(workdir, "-n", *args)
    text = out.stdout + out.stderr
    if "Nothing to be done" in text:
        return {}
    stats = text.split("Job stats:", 1)[1]
    jobs = {}
    for line in stats.splitlines()[3:]:
        m = re.match(r"^(\w+)\s+(\d+)\s*$", line)
        if not m:
            break
        if m.group(1) != "total":
            jobs[m.group(1)] = int(m.group(2))
    return jobs
