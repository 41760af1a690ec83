"""The config check counts each model's parameters and hidden blocks on the meta device without
running its weight initializations (bnstudy.config.model_checks.plan): the counts are those of
the model itself, and checking a study does not import torch's compiler (torch._dynamo, about
2 s of CPU in every Snakemake start)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from bnstudy import data
from bnstudy.config import model_checks, study
from bnstudy.networks import models
from bnstudy.networks.blocks import blocks

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = ["config/config.yaml", *sorted(f"config/studies/{p.name}"
                                         for p in (ROOT / "config" / "studies").glob("*.yaml"))]


def _models(path: str):
    cfg = study.load([ROOT / path])
    for e in cfg["experiments"].values():
        ds = cfg["datasets"][e["dataset"]]
        yield models.ModelConfig.from_dict(cfg["models"][e["model"]]), ds["kind"], ds["options"]


@pytest.mark.parametrize("path", CONFIGS)
def test_the_counts_are_the_models_own(path):
    """Against the same model built on the meta device with its initializations run (torch's
    own path), for every model a shipped study config builds."""
    seen = set()
    for mcfg, kind, options in _models(path):
        shape, out_dim = data.shape(kind, options)
        key = (repr(mcfg), tuple(shape), out_dim)
        if key in seen:
            continue
        seen.add(key)
        n, hidden = model_checks.plan(mcfg, shape, out_dim)
        bare = model_checks.replace(mcfg, dropout=0.0, norm_options={})
        with torch.random.fork_rng(devices=[]), torch.device("meta"):
            net = models.build_model(bare, "none", shape, out_dim)
        assert (n, hidden) == (sum(p.numel() for p in net.parameters()), len(blocks(net)))


def test_checking_a_study_does_not_import_torchs_compiler():
    code = ("import sys; from bnstudy.config import study; "
            "study.check(study.load(['config/studies/santurkar.yaml']), local=False); "
            "study.check(study.load(['config/config.yaml']), local=False); "
            "print('torch._dynamo' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False", out.stdout + out.stderr
