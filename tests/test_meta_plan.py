"""The config check counts each model's parameters and hidden blocks on the meta device without
running its weight initializations (bnstudy.config.model_checks.plan): the counts are those of
the model itself, and checking a study does not import torch's compiler (torch._dynamo, about
2 s of CPU in every Snakemake start). The cluster requests' model sizes (bnstudy.model_size) run
one sample through zero-stride CPU weights instead of meta tensors: the sizes are those a
forward pass on the meta device counts, without that import either."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from bnstudy import data, model_size
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
        bare = dataclasses.replace(mcfg, dropout=0.0, norm_options={})
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


def _meta_size(mcfg, shape, out_dim) -> dict:
    """The reference: the model built on the meta device with its initializations run and one
    meta sample through it, each leaf's output and weight counted by a hook."""
    bare = dataclasses.replace(mcfg, dropout=0.0, norm_options={})
    macs, outs = 0, []

    def hook(module, _inputs, out):
        nonlocal macs
        outs.append(out.numel())
        w = getattr(module, "weight", None)
        if isinstance(w, torch.Tensor) and w.dim() >= 2 and out.dim() >= 2:
            macs += w.numel() * (out.numel() // out.shape[1])

    with torch.random.fork_rng(devices=[]), torch.device("meta"):
        net = models.build_model(bare, "none", shape, out_dim)
        for m in net.modules():
            if not list(m.children()):
                m.register_forward_hook(hook)
        net.eval()(torch.zeros(1, *shape))
    return {"params": sum(p.numel() for p in net.parameters()), "macs": macs,
            "activations": sum(outs), "largest": max(outs), "layers": len(blocks(net)) + 1}


@pytest.mark.parametrize("path", CONFIGS)
def test_model_sizes_are_those_a_meta_forward_counts(path, monkeypatch):
    monkeypatch.setenv("BNSTUDY_CACHE", "off")
    cfg = study.load([ROOT / path])
    seen = set()
    for e in cfg["experiments"].values():
        ds = cfg["datasets"][e["dataset"]]
        shape, out_dim = data.shape(ds["kind"], ds["options"])
        key = (repr(cfg["models"][e["model"]]), tuple(shape), out_dim)
        if key in seen:
            continue
        seen.add(key)
        got = vars(model_size.size(cfg["models"][e["model"]], shape, out_dim))
        want = _meta_size(models.ModelConfig.from_dict(cfg["models"][e["model"]]), shape,
                          out_dim)
        assert {k: got[k] for k in want} == want, (path, e["model"])


def test_sizing_a_study_s_jobs_does_not_import_torchs_compiler():
    """The Snakefile sizes each job's cluster request (bnstudy.planning.job_resources) at every
    start whose package or config is new to the cache: no torch._dynamo import there."""
    code = ("import sys; from bnstudy import data, model_size; from bnstudy.config import study\n"
            "for path in ['config/studies/santurkar.yaml', 'config/config.yaml']:\n"
            "    cfg = study.load([path])\n"
            "    for e in cfg['experiments'].values():\n"
            "        ds = cfg['datasets'][e['dataset']]\n"
            "        model_size.size(cfg['models'][e['model']],"
            " *data.shape(ds['kind'], ds['options']))\n"
            "print('torch._dynamo' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         check=True, env={**os.environ, "BNSTUDY_CACHE": "off"})
    assert out.stdout.strip() == "False", out.stdout + out.stderr
