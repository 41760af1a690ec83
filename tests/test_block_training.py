"""Blocks of seeds (issue 47): a seed's numbers do not depend on its block.

``train_block`` steps the seeds of one arm together through the stacked kernel
(:mod:`bnstudy.train.stacked`); ``train`` is a block of one. Checked bitwise: seed s alone, at
slot 0 of a block of 4 and at slot 3 of a block of 16 gives the same checkpoints (weights, BN
buffers, momentum buffers, batches) and history, for an MLP with and without BN and for a CNN;
a diverging seed leaves the others' numbers as they are alone; a killed block resumes to the
uninterrupted block's results.
"""

from __future__ import annotations

import pandas as pd
import pytest
import torch
from specs import make_spec
from test_resume import Killed, _counting, assert_same_run

from bnstudy import data, io
from bnstudy.networks import normalizers
from bnstudy.train import loop as training
from bnstudy.train import stacked
from bnstudy.train.spec import RunSpec

SHORT = {"lr": 0.05, "momentum": 0.9, "weight_decay": 1e-3, "batch_size": 16, "steps": 6,
         "eval_every": 3, "checkpoints": [0, 1, 4]}
CONV = {"arch": "vgg", "channels": [4, "M", 8, "M"]}


@pytest.fixture(scope="module")
def digit_images():
    return data.make("digits", {"seed": 0, "image": True})


@pytest.mark.parametrize("norm,model", [("none", None), ("batchnorm", None),
                                        ("batchnorm", CONV)])
def test_a_seed_is_the_same_alone_at_slot_0_of_4_and_slot_3_of_16(norm, model, star,
                                                                   digit_images):
    ds = star if model is None else digit_images
    spec = lambda s: make_spec(norm=norm, seed=s, model=model, training=SHORT)  # noqa: E731
    s = 7
    alone = training.train(spec(s), ds, "cpu")
    four = training.train_block([spec(s), spec(20), spec(21), spec(22)], ds, "cpu")
    sixteen = training.train_block([spec(30 + i) for i in range(3)] + [spec(s)]
                                   + [spec(40 + i) for i in range(12)], ds, "cpu")
    assert stacked.batchable(RunSpec.parse(spec(s)))[0]
    assert_same_run(alone, four[0])
    assert_same_run(alone, sixteen[3])
    assert four[1]["spec"].seed == 20 and not torch.equal(
        four[1]["checkpoints"][-1]["batch"], four[0]["checkpoints"][-1]["batch"])


def _diverging(seed):
    return make_spec(norm="batchnorm", seed=seed, training={
        "lr": 40.0, "momentum": 0.9, "batch_size": 16, "steps": 40, "eval_every": 5,
        "checkpoints": [0, 10, 20]})


def _nan_marked(run: dict) -> dict:
    """``run`` with NaN weights and momenta replaced by a marker (torch.equal says NaN != NaN)."""
    mark = lambda t: t.nan_to_num(nan=1234.5) if t.is_floating_point() else t  # noqa: E731
    cks = [{**c, "model": {k: mark(v) for k, v in c["model"].items()},
            "optimizer": {**c["optimizer"], "state": {
                i: {k: mark(v) if torch.is_tensor(v) else v for k, v in st.items()}
                for i, st in c["optimizer"]["state"].items()}}} for c in run["checkpoints"]]
    return {**run, "checkpoints": cks}


def test_a_diverging_seed_leaves_the_others_numbers_unchanged(star):
    seeds = [0, 3, 1, 5]  # at lr 40, seeds 0 and 1 diverge (steps 20, 22), 3 and 5 do not
    block = training.train_block([_diverging(s) for s in seeds], star, "cpu")
    assert [r["diverged"] for r in block] == [True, False, True, False]
    for s, r in zip(seeds, block, strict=True):
        assert_same_run(_nan_marked(training.train(_diverging(s), star, "cpu")), _nan_marked(r))
    assert block[0]["history"][-1]["split"] == "batch"


def test_a_killed_block_resumes_to_the_uninterrupted_results(star, tmp_path, monkeypatch):
    specs = [make_spec(norm="batchnorm", seed=s, training={
        "lr": 0.05, "momentum": 0.9, "batch_size": 16, "steps": 20, "eval_every": 5,
        "checkpoints": [0, 1, 5, 10, 15]}) for s in (2, 4, 6)]
    full = training.train_block(specs, star, "cpu")
    paths = [tmp_path / f"s{i}" / "resume.pt" for i in range(3)]
    for p in paths:
        p.parent.mkdir()
    _counting(monkeypatch, crash_at=12)  # one update of the block is one optimizer step
    with pytest.raises(Killed):
        training.train_block(specs, star, "cpu", resume_paths=paths)
    assert [io.load_pt(p, training.RESUME_KIND)["step"] for p in paths] == [10, 10, 10]
    seen = _counting(monkeypatch)
    resumed = training.train_block(specs, star, "cpu", resume_paths=paths)
    assert seen["updates"] == 10, "the block did not resume from step 10"
    for a, b in zip(full, resumed, strict=True):
        assert_same_run(a, b)
    alone = training.train(specs[1], star, "cpu")
    pd.testing.assert_frame_equal(pd.DataFrame(alone["history"]).drop(columns="wall_time"),
                                  pd.DataFrame(full[1]["history"]).drop(columns="wall_time"))


def test_a_block_is_seeds_of_one_arm(star):
    with pytest.raises(ValueError, match="one arm"):
        training.train_block([make_spec(seed=0), make_spec(norm="none", seed=1)], star, "cpu")


def test_an_unbatchable_normalizer_trains_its_seeds_one_after_another(star):
    spec = lambda s: make_spec(norm="noisy_batchnorm", seed=s, training=SHORT)  # noqa: E731
    assert not stacked.batchable(RunSpec.parse(spec(0)))[0]
    block = training.train_block([spec(0), spec(1)], star, "cpu")
    assert_same_run(training.train(spec(1), star, "cpu"), block[1])


def test_the_train_verb_trains_a_block_into_each_runs_files(star, tmp_path):
    """One ``python -m bnstudy train`` with several specs: each run's files, as trained alone."""
    import json

    from bnstudy.cli import main as cli
    from bnstudy.tables import layout
    from bnstudy.train import checkpoints

    npz = tmp_path / "results" / "data" / "star2d.npz"
    npz.parent.mkdir(parents=True)
    data.save(star, npz)
    specs = [make_spec(norm="batchnorm", seed=s, training=SHORT, experiment="tiny")
             for s in (0, 1)]
    outs = [[str(layout.run_file(tmp_path / "results", "tiny", "batchnorm", s, f))
             for s in (0, 1)] for f in ("checkpoints.pt", "history.parquet")]
    args = ["train", "--data", str(npz), "--device", "cpu", "--spec",
            *[json.dumps(s) for s in specs], "--out-checkpoints", *outs[0],
            "--out-history", *outs[1]]
    assert cli.main(args) == 0
    for s, ck in zip(specs, outs[0], strict=True):
        alone = training.train(s, star, "cpu")
        assert_same_run({**checkpoints.load(ck), "history": alone["history"]}, alone)
    assert cli.main([*args[:-1]]) != 0  # one history file for two specs: refused


@pytest.mark.parametrize("norm", sorted(n for n, z in normalizers.REGISTRY.items() if z.batched))
def test_the_stacked_kernel_computes_the_layers_own_gradient(norm, star, digit_images):
    """Every normalizer registered batched: its gradient through the stacked kernel is the
    unbatched layer's (in float64, where rounding is far below the tolerance), so nothing the
    layer does in a training backward is lost under vmap (weightnorm_gamma_decay's extra
    gradient was: 0.2 off on gamma at zeta 0.1, so it is registered batched=False)."""
    conv = norm == "instancenorm"
    ds = digit_images if conv else star
    spec = make_spec(norm=norm, seed=1, model=CONV if conv else None, training=SHORT)
    x = torch.as_tensor(ds.x_train[:16]).double()
    y = torch.as_tensor(ds.y_train[:16])
    lf = training.loss_fn(ds.task)
    grads = []
    for batched in (False, True):
        model = training.build(spec, ds).double().train()
        if batched:
            stacked.seed_gradients(model, x, y, lf)
        else:
            lf(model(x), y).backward()
        grads.append({n: p.grad for n, p in model.named_parameters()})
    for n, g in grads[0].items():
        torch.testing.assert_close(grads[1][n], g, rtol=1e-9, atol=1e-12, msg=f"{norm} {n}")
