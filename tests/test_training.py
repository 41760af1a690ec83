import logging
import math
import re

import pytest
import torch
from specs import make_spec

from bnstudy.train import checkpoints, stacked
from bnstudy.train import loop as training


def _flat(state):
    return torch.cat([v.flatten().float() for k, v in sorted(state.items())])


def test_history_and_checkpoint_schedule(star):
    res = training.train(make_spec(), star, "cpu")
    assert not res["diverged"]
    assert checkpoints.steps(res) == [0, 1, 2, 10, 20]
    steps = sorted({h["step"] for h in res["history"]})
    assert steps == [0, 5, 10, 15, 20]
    assert {h["split"] for h in res["history"]} == {"train", "test"}
    assert all(len(c["batch"]) == 16 for c in res["checkpoints"])
    assert all(0 <= a <= 1 for a in (h["accuracy"] for h in res["history"]))


def test_same_seed_same_numbers_other_seed_other_numbers(star):
    a = training.train(make_spec(seed=3), star, "cpu")
    b = training.train(make_spec(seed=3), star, "cpu")
    c = training.train(make_spec(seed=4), star, "cpu")
    for ca, cb in zip(a["checkpoints"], b["checkpoints"], strict=True):
        assert torch.equal(_flat(ca["model"]), _flat(cb["model"]))
        assert torch.equal(ca["batch"], cb["batch"])
    assert [h["loss"] for h in a["history"]] == [h["loss"] for h in b["history"]]
    last_a, last_c = a["checkpoints"][-1]["model"], c["checkpoints"][-1]["model"]
    assert not torch.equal(_flat(last_a), _flat(last_c))


@pytest.mark.parametrize("norm", ["none", "batchnorm", "layernorm", "weightnorm"])
def test_checkpoint_replays_the_exact_update(star, norm):
    """Checkpoint t's weights + optimizer state + batch give checkpoint t+1's weights."""
    spec = make_spec(norm=norm, training={"lr": 0.1, "momentum": 0.9, "weight_decay": 1e-3,
                                          "batch_size": 8, "steps": 3, "eval_every": 1,
                                          "checkpoints": [0, 1, 2]})
    run = training.train(spec, star, "cpu")
    for i in range(2):
        r = checkpoints.restore(run, i, star)
        x = torch.as_tensor(star.x_train)[r.batch]
        y = torch.as_tensor(star.y_train)[r.batch]
        r.optimizer.zero_grad()
        training.loss_fn(star.task)(r.model(x), y).backward()
        r.optimizer.step()
        nxt = run["checkpoints"][i + 1]["model"]
        for k, v in r.model.state_dict().items():
            assert torch.allclose(v.float(), nxt[k].float(), atol=1e-6), k


def test_full_batch_uses_every_sample(linear_ds):
    spec = make_spec(norm="none", model={"arch": "dln", "depth": 3, "init": "xavier"},
                     training={"lr": 0.01, "batch_size": "full", "steps": 4, "eval_every": 2})
    run = training.train(spec, linear_ds, "cpu")
    assert torch.equal(run["checkpoints"][0]["batch"], torch.arange(64))
    assert all(math.isnan(h["accuracy"]) for h in run["history"])


def test_divergence_is_recorded_not_raised(linear_ds):
    spec = make_spec(norm="none", model={"arch": "dln", "depth": 6, "init": "xavier"},
                     training={"lr": 50.0, "batch_size": "full", "steps": 200, "eval_every": 1,
                               "checkpoints": [0, 1, 100]})
    run = training.train(spec, linear_ds, "cpu")
    assert run["diverged"]
    last = run["history"][-1]
    assert last["split"] == "batch" and not math.isfinite(last["loss"])
    assert last["step"] < 200
    assert all(c["step"] <= last["step"] for c in run["checkpoints"])
    df = training.history_frame(run)
    assert df["diverged"].all()


def test_evaluate_restores_mode_and_buffers(star):
    model = training.build(make_spec(), star)
    model.train()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    x, y = torch.as_tensor(star.x_test), torch.as_tensor(star.y_test)
    training.evaluate(model, x, y, "classification")
    assert model.training
    assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items())


def test_bad_training_options_are_named():
    with pytest.raises(ValueError, match="unknown training option.*'learning_rate'"):
        training.TrainConfig.from_dict({"learning_rate": 0.1})
    with pytest.raises(ValueError, match="unknown device 'gpu'.*auto, cpu, cuda"):
        training.resolve_device("gpu")


def test_batch_sampler_is_epoch_wise_without_replacement():
    s = training.BatchSampler(10, 3, seed=0)
    first_epoch = torch.cat([s.next() for _ in range(3)])
    assert len(set(first_epoch.tolist())) == 9


PROGRESS = re.compile(
    r"^train t/(?P<norm>\w+)/seed(?P<seed>\d+): step (?P<step>\d+)/(?P<total>\d+) \(\d+%\), "
    r"train loss (?P<train>\S+), test loss (?P<test>\S+)(?:, test acc (?P<acc>\S+))?, "
    r"elapsed (?P<elapsed>[\d.]+)s, ETA (?P<eta>[\d.]+s|n/a)$")


def _progress(caplog):
    return [PROGRESS.match(r.getMessage()) for r in caplog.records
            if r.name == "bnstudy" and r.levelno == logging.INFO and "step " in r.getMessage()]


def test_progress_line_per_evaluation_step(star, caplog):
    """One INFO line per evaluation step (steps 0, 5, 10, 15, 20 of 20) with the history's
    numbers, the elapsed time and an ETA; logging changes no number the training computes."""
    caplog.set_level(logging.INFO, logger="bnstudy")
    logged = training.train(make_spec(seed=2), star, "cpu")
    lines = _progress(caplog)
    assert len(lines) == 5 and all(lines), [r.getMessage() for r in caplog.records]
    hist = {(h["step"], h["split"]): h for h in logged["history"]}
    for m, step in zip(lines, (0, 5, 10, 15, 20), strict=True):
        assert (int(m["step"]), int(m["total"]), m["norm"], m["seed"]) == (step, 20,
                                                                            "batchnorm", "2")
        assert float(m["train"]) == pytest.approx(hist[(step, "train")]["loss"], rel=1e-3)
        assert float(m["test"]) == pytest.approx(hist[(step, "test")]["loss"], rel=1e-3)
        assert float(m["acc"]) == pytest.approx(hist[(step, "test")]["accuracy"], abs=1e-4)
        assert float(m["elapsed"]) == pytest.approx(hist[(step, "test")]["wall_time"], abs=0.06)
        assert (m["eta"] == "n/a") == (step == 0)
    assert lines[-1]["eta"] == "0.0s"
    caplog.set_level(logging.WARNING, logger="bnstudy")
    quiet = training.train(make_spec(seed=2), star, "cpu")
    assert [h["loss"] for h in quiet["history"]] == [h["loss"] for h in logged["history"]]
    assert torch.equal(_flat(quiet["checkpoints"][-1]["model"]),
                       _flat(logged["checkpoints"][-1]["model"]))


def test_progress_line_of_a_regression_run_has_no_accuracy(linear_ds, caplog):
    caplog.set_level(logging.INFO, logger="bnstudy")
    spec = make_spec(norm="none", model={"arch": "dln", "depth": 3, "init": "xavier"},
                     training={"lr": 0.01, "batch_size": "full", "steps": 4, "eval_every": 2})
    training.train(spec, linear_ds, "cpu")
    lines = _progress(caplog)
    assert [int(m["step"]) for m in lines] == [0, 2, 4] and all(m["acc"] is None for m in lines)


def _no_wall(rows):
    """History rows without their wall time, NaN as a string (comparable)."""
    nan = lambda v: "nan" if isinstance(v, float) and math.isnan(v) else v  # noqa: E731
    return [{k: nan(v) for k, v in r.items() if k != "wall_time"} for r in rows]


def _diverging(eval_every, checkpoints):
    return make_spec(norm="batchnorm", training={
        "lr": 40.0, "momentum": 0.9, "batch_size": 16, "steps": 60, "eval_every": eval_every,
        "checkpoints": checkpoints})


def test_divergence_read_at_evaluations_is_cut_back_to_the_failing_step(star):
    """Losses are read on the host only at evaluation and checkpoint steps; a divergence found
    there is cut back to its step: the same row and checkpoints as a check at every step."""
    every = training.train(_diverging(1, [0, 1, 2, 3, 30]), star, "cpu")
    assert every["diverged"]
    fail = every["history"][-1]
    assert fail["split"] == "batch" and not math.isfinite(fail["loss"]) and 3 < fail["step"] < 30
    for eval_every in (7, 1000):
        late = training.train(_diverging(eval_every, [0, 1, 2, 3, 30]), star, "cpu")
        assert late["diverged"]
        assert _no_wall(late["history"][-1:]) == _no_wall([fail])
        assert all(h["step"] <= fail["step"] for h in late["history"])
        expected = [h for h in every["history"][:-1] if h["step"] % eval_every == 0]
        assert _no_wall(late["history"][:-1]) == _no_wall(expected)
        assert [c["step"] for c in late["checkpoints"]] == [0, 1, 2, 3]
        for a, b in zip(late["checkpoints"], every["checkpoints"], strict=True):
            assert torch.equal(a["batch"], b["batch"])
            assert all(torch.equal(a["model"][k], b["model"][k]) for k in a["model"])


def test_an_error_after_an_unchecked_divergence_is_the_divergence(star, monkeypatch):
    """A step on NaN weights that raises (a layer or hook failing on them) before the next
    check ends the run as diverged at the failing step; an error on finite weights raises."""
    ref = training.train(_diverging(1000, [0]), star, "cpu")
    losses = stacked.Stacked.losses

    def fragile(kern, xs, ys):
        if not all(torch.isfinite(p).all() for p in kern.models[0].parameters()):
            raise RuntimeError("non-finite weights")
        fragile.calls += 1
        if fragile.calls == 3 and fragile.fail_at_2:
            raise RuntimeError("step 2 failed")
        return losses(kern, xs, ys)

    fragile.fail_at_2, fragile.calls = False, 0
    monkeypatch.setattr(stacked.Stacked, "losses", fragile)
    run = training.train(_diverging(1000, [0]), star, "cpu")
    assert run["diverged"] and _no_wall(run["history"]) == _no_wall(ref["history"])
    fragile.fail_at_2, fragile.calls = True, 0
    with pytest.raises(RuntimeError, match="step 2 failed"):
        training.train(_diverging(1000, [0]), star, "cpu")
