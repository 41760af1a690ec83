"""Learning-rate schedules (closed forms, warm-up, step-decay boundaries, batch scaling) and the
CIFAR augmentation (crop + flip correctness, determinism), in the trainer: the history's and the
checkpoints' lr, exact replay of an update, resume exactness with both on."""

import math

import pandas as pd
import pytest
import torch
from specs import make_spec

from bnstudy import data, io
from bnstudy.train import augment, checkpoints, schedules
from bnstudy.train import loop as training

CONV = {"arch": "vgg", "channels": [4, "M", 8, "M"]}


def _schedule(n_train=64, **cfg):
    return schedules.from_config(training.TrainConfig.from_dict(cfg), n_train)


def test_decays_match_their_closed_forms():
    inv = _schedule(lr=0.2, lr_schedule="inverse_time", lr_decay=1e-4)
    exp = _schedule(lr=0.2, lr_schedule="exponential", lr_decay=1e-3)
    for t in (0, 1, 10, 1000, 10000):
        assert inv(t) == pytest.approx(0.2 / (1 + 1e-4 * t), rel=1e-12)
        assert exp(t) == pytest.approx(0.2 * 0.999 ** t, rel=1e-12)
    assert inv(10000) == pytest.approx(0.1) and _schedule(lr=0.3)(12345) == 0.3


def test_step_decay_boundaries_in_steps_and_epochs():
    s = _schedule(lr=1.0, lr_schedule="step", lr_milestones=[10, 5], lr_step_factor=0.1)
    assert [s(t) for t in (0, 4, 5, 9, 10, 99)] == pytest.approx([1, 1, 0.1, 0.1, 0.01, 0.01])
    # 64 samples in batches of 16: 4 updates per epoch; epochs 2 and 3 start at steps 8 and 12
    e = _schedule(lr=1.0, batch_size=16, lr_schedule="step", lr_milestones=[2, 3],
                  lr_milestone_unit="epoch", lr_step_factor=0.5)
    assert [e(t) for t in (7, 8, 11, 12)] == pytest.approx([1, 0.5, 0.5, 0.25])
    full = _schedule(lr=1.0, batch_size="full", lr_schedule="step", lr_milestones=[3],
                     lr_milestone_unit="epoch")
    assert [full(2), full(3)] == pytest.approx([1, 0.1])


def test_linear_warmup_then_decay():
    s = _schedule(lr=0.4, warmup_steps=4)
    assert [s(t) for t in range(6)] == pytest.approx([0.1, 0.2, 0.3, 0.4, 0.4, 0.4])
    d = _schedule(lr=0.4, warmup_steps=4, lr_schedule="inverse_time", lr_decay=0.5)
    assert d(1) == pytest.approx(0.4 * 2 / 4 / 1.5) and d(6) == pytest.approx(0.4 / 4)


def test_lr_scaled_with_the_batch_size():
    assert _schedule(lr=0.1, batch_size=32, lr_reference_batch=128)(0) == pytest.approx(0.025)
    assert _schedule(lr=0.1, batch_size=1024, lr_reference_batch=128,
                     n_train=50000)(0) == pytest.approx(0.8)
    assert _schedule(lr=0.1, batch_size="full", lr_reference_batch=32)(0) == pytest.approx(0.2)
    assert _schedule(lr=0.1, batch_size=32)(0) == 0.1  # no reference: no scaling


@pytest.mark.parametrize("bad, match", [
    ({"lr_schedule": "cosine"}, "lr_schedule='cosine'.*constant, inverse_time, exponential, step"),
    ({"lr_schedule": "exponential"}, "lr_decay=0.0.*for lr_schedule exponential"),
    ({"lr_decay": 1.5}, r"lr_decay=1.5.*\[0, 1\)"),
    ({"lr_schedule": "step"}, "lr_milestones=.*non-empty"),
    ({"lr_milestones": [3]}, "lr_milestones=.*unless lr_schedule is step"),
    ({"lr_schedule": "step", "lr_milestones": [0]}, "lr_milestones=.*integers >= 1"),
    ({"lr_milestone_unit": "batch"}, "lr_milestone_unit='batch'.*step, epoch"),
    ({"warmup_steps": -1}, "warmup_steps=-1.*integer >= 0"),
    ({"lr_reference_batch": 0}, "lr_reference_batch=0.*null"),
    ({"augment": "yes"}, "augment='yes'.*true, false"),
    ({"augment": True, "augment_padding": -2}, "augment_padding=-2.*integer >= 0"),
])
def test_bad_schedule_and_augment_options_are_named(bad, match):
    with pytest.raises(ValueError, match=match):
        training.TrainConfig.from_dict(bad)


def test_crop_and_flip_on_a_tiny_image():
    x = torch.arange(9.0).view(1, 1, 3, 3)  # rows [0 1 2], [3 4 5], [6 7 8]
    # padding 1: the window at (dy, dx) = (0, 2) covers padded rows -1..1, columns 1..3
    out = augment.crop_flip(x, torch.tensor([0]), torch.tensor([2]), torch.tensor([False]), 1)
    assert out.tolist() == [[[[0, 0, 0], [1, 2, 0], [4, 5, 0]]]]
    flipped = augment.crop_flip(x, torch.tensor([0]), torch.tensor([2]), torch.tensor([True]), 1)
    assert flipped.tolist() == [[[[0, 0, 0], [0, 2, 1], [0, 5, 4]]]]  # the same window mirrored
    same = augment.crop_flip(x, torch.tensor([1]), torch.tensor([1]), torch.tensor([False]), 1)
    assert torch.equal(same, x)  # the centred window is the image


def test_augmented_batches_have_the_shape_and_depend_only_on_seed_and_step():
    x = torch.randn(64, 3, 32, 32)
    a = augment.batch_inputs(x, seed=0, step=5, padding=4)
    assert a.shape == x.shape and a.dtype == x.dtype
    assert torch.equal(a, augment.batch_inputs(x, seed=0, step=5, padding=4))
    for other in ((0, 6), (1, 5)):
        assert not torch.equal(a, augment.batch_inputs(x, *other, padding=4))
    dy, dx, flip = augment.draw(4000, 4, seed=0, step=0)
    assert set(dy.tolist()) == set(range(9)) == set(dx.tolist())
    assert 0.45 < flip.float().mean() < 0.55
    with pytest.raises(ValueError, match="needs image inputs.*shape \\(2,\\)"):
        augment.batch_inputs(torch.randn(5, 2), 0, 0, 4)


@pytest.fixture(scope="module")
def digit_images():
    return data.make("digits", {"seed": 0, "image": True})


SCHEDULED = {"lr": 0.05, "momentum": 0.9, "batch_size": 16, "steps": 12, "eval_every": 3,
             "checkpoints": [0, 1, 5, 6, 7, 9], "lr_schedule": "step", "lr_milestones": [6],
             "lr_step_factor": 0.5, "warmup_steps": 3, "lr_reference_batch": 8,
             "augment": True, "augment_padding": 1}


def test_trainer_uses_and_records_the_scheduled_lr(digit_images):
    spec = make_spec(model=CONV, training=SCHEDULED)
    run = training.train(spec, digit_images, "cpu")
    lr = schedules.from_config(training.TrainConfig.from_dict(SCHEDULED), len(digit_images.x_train))
    hist = pd.DataFrame(run["history"])
    assert all(hist["lr"] == [lr(t) for t in hist["step"]])
    assert lr(0) == pytest.approx(0.1 / 3) and lr(6) == pytest.approx(0.05)
    for ck in run["checkpoints"]:
        assert ck["optimizer"]["param_groups"][0]["lr"] == lr(ck["step"])
    # checkpoint t + its optimizer + the augmented images of its batch give checkpoint t+1
    xtr, ytr = torch.as_tensor(digit_images.x_train), torch.as_tensor(digit_images.y_train)
    for i in (2, 3):  # steps 5 (before the milestone) and 6 (after)
        r = checkpoints.restore(run, i, digit_images)
        x = augment.batch_inputs(xtr[r.batch], spec["seed"], r.step, 1, digit_images.input_shape)
        r.optimizer.zero_grad()
        training.loss_fn("classification")(r.model(x), ytr[r.batch]).backward()
        r.optimizer.step()
        nxt = run["checkpoints"][i + 1]
        assert nxt["step"] == r.step + 1
        for k, v in r.model.state_dict().items():
            assert torch.allclose(v.float(), nxt["model"][k].float(), atol=1e-6), k


def test_augmentation_is_deterministic_and_changes_training(digit_images, star):
    spec = make_spec(model=CONV, training=SCHEDULED)
    a, b = (training.train(spec, digit_images, "cpu") for _ in range(2))
    unaugmented = {k: v for k, v in SCHEDULED.items() if k != "augment_padding"}  # no padding
    plain = training.train(make_spec(model=CONV, training={**unaugmented, "augment": False}),
                           digit_images, "cpu")
    last = lambda r: r["checkpoints"][-1]["model"]  # noqa: E731
    assert all(torch.equal(v, last(b)[k]) for k, v in last(a).items())
    assert not all(torch.equal(v, last(plain)[k]) for k, v in last(a).items())
    with pytest.raises(ValueError, match="augment: true needs image inputs"):
        training.train(make_spec(training={**SCHEDULED, "augment": True}), star, "cpu")


class Killed(Exception):
    pass


def test_resume_is_exact_with_schedule_and_augmentation(digit_images, tmp_path, monkeypatch):
    spec = make_spec(model=CONV, training=SCHEDULED)
    full = training.train(spec, digit_images, "cpu")
    make = training.make_optimizer

    def crashing(model, cfg):  # killed before update 8: the latest checkpoint is step 7
        opt, n = make(model, cfg), {"updates": 0}
        real = opt.step

        def step(*args, **kwargs):
            if n["updates"] == 8:
                raise Killed
            n["updates"] += 1
            return real(*args, **kwargs)

        opt.step = step
        return opt

    path = tmp_path / "resume.pt"
    monkeypatch.setattr(training, "make_optimizer", crashing)
    with pytest.raises(Killed):
        training.train(spec, digit_images, "cpu", resume_path=path)
    monkeypatch.setattr(training, "make_optimizer", make)
    assert io.load_pt(path, training.RESUME_KIND)["step"] == 7
    resumed = training.train(spec, digit_images, "cpu", resume_path=path)
    for ca, cb in zip(full["checkpoints"], resumed["checkpoints"], strict=True):
        assert ca["step"] == cb["step"] and torch.equal(ca["batch"], cb["batch"])
        assert all(torch.equal(v, cb["model"][k]) for k, v in ca["model"].items())
        assert ca["optimizer"]["param_groups"] == cb["optimizer"]["param_groups"]
    drop = lambda r: pd.DataFrame(r["history"]).drop(columns="wall_time")  # noqa: E731
    pd.testing.assert_frame_equal(drop(full), drop(resumed), check_exact=True)
    assert math.isclose(full["history"][-1]["lr"], 0.05)


def test_the_schema_takes_every_training_option_and_jitter_without_defaults():
    import dataclasses

    from bnstudy.config.entries import entry_schemas
    from bnstudy.config.loader import ConfigError, validate_schema

    trainings = entry_schemas()["trainings"]["properties"]
    assert set(trainings) == {f.name for f in dataclasses.fields(training.TrainConfig)}
    new = set(schedules.KEYS) | {"augment", "augment_padding"}
    assert not any("default" in trainings[k] for k in new)  # run specs of old configs unchanged
    cfg = {"datasets": {"d": {"kind": "digits"}},
           "models": {"m": {"arch": "mlp", "norm_options": {"batchnorm_jitter": {
               "extra_variance": 0.15}}}},
           "trainings": {"t": {"lr": 0.1, "steps": 5, **{k: v for k, v in SCHEDULED.items()
                                                         if k in new}}},
           "experiments": {"e": {"dataset": "d", "model": "m", "training": "t",
                                 "norms": ["batchnorm_jitter"], "seeds": [0]}}}
    validate_schema(cfg)
    assert set(cfg["trainings"]["t"]) - new == {"lr", "steps", "momentum", "weight_decay",
                                                 "batch_size", "eval_every", "checkpoints"}
    cfg["trainings"]["t"]["lr_schedule"] = "cosine"
    with pytest.raises(ConfigError, match="lr_schedule"):
        validate_schema(cfg)


def _schema():
    from pathlib import Path

    import yaml

    return yaml.safe_load((Path(__file__).parents[1] / "workflow/schemas/config.schema.yaml")
                          .read_text())


def test_schedule_defaults_are_trainconfigs_fields():
    """The schedule keys' defaults are declared once, on TrainConfig's fields."""
    import dataclasses

    fields = {f.name: f.default for f in dataclasses.fields(training.TrainConfig)}
    assert set(schedules.KEYS) <= set(fields)
    got = schedules.check({"lr_schedule": "step", "lr_milestones": [5], "steps": 10},
                          {**fields, "lr_step_factor": 0.5})
    assert got["lr_step_factor"] == 0.5 and got["lr_milestone_unit"] == "step"
    assert training.TrainConfig.from_dict({"lr": 0.1, "steps": 10}).lr_step_factor == fields[
        "lr_step_factor"]
