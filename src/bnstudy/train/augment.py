"""Standard CIFAR augmentation: random crop with zero padding, random horizontal flip.

With ``augment: true`` in a training config every training mini-batch image ``(C, H, W)`` is
zero-padded by ``augment_padding`` pixels on each side (4 for CIFAR's 32x32 images, as
torchvision's ``RandomCrop(32, padding=4)``; zero is the mean pixel of standardized images), an
``H x W`` window at a uniformly random offset in ``[0, 2 * padding]^2`` is cut out, and with
probability 1/2 it is mirrored left-right (``RandomHorizontalFlip``). Off by default: Santurkar
et al. train their VGG without augmentation.

**Determinism.** The draws of update ``t`` are a function of ``(run seed, t)`` alone (a CPU
generator seeded from both, as noisy BN's noise is a function of (layer seed, step)): the same
config and seed give the same images on every run and device, and a run resumed from a
checkpoint replays them without any saved RNG state. Evaluation (train and test loss/accuracy)
uses the un-augmented images.

A checkpoint's ``batch`` holds training-set indices; the exact inputs of update ``t`` are
``batch_inputs(x_train[batch], seed, t, padding, input_shape)``, which :func:`update_inputs`
gives from a run spec: the measures that replay a step (ICS, smoothness) evaluate those.
"""

from __future__ import annotations

import torch

_MIX = (0x9E3779B97F4A7C15, 0xBF58476D1CE4E5B9)


def generator(seed: int, step: int) -> torch.Generator:
    """The CPU generator of update ``step``'s augmentation in run ``seed``."""
    return torch.Generator().manual_seed((int(seed) * _MIX[0] + int(step) * _MIX[1] + 1) % 2**63)


def draw(n: int, padding: int, seed: int, step: int) -> tuple[torch.Tensor, ...]:
    """Row offsets, column offsets (in ``0..2*padding``) and flip flags of ``n`` images."""
    g = generator(seed, step)
    dy = torch.randint(0, 2 * padding + 1, (n,), generator=g)
    dx = torch.randint(0, 2 * padding + 1, (n,), generator=g)
    flip = torch.rand(n, generator=g) < 0.5
    return dy, dx, flip


def crop_flip(x: torch.Tensor, dy: torch.Tensor, dx: torch.Tensor, flip: torch.Tensor,
              padding: int) -> torch.Tensor:
    """Images ``x (N, C, H, W)`` padded with zeros, cropped at ``(dy, dx)``, flipped where
    ``flip``: ``out[n, :, i, j] = padded[n, :, dy[n] + i, dx[n] + j']`` with ``j' = W - 1 - j``
    for flipped images."""
    n, _, h, w = x.shape
    dev = x.device
    padded = torch.nn.functional.pad(x, (padding,) * 4)
    rows = dy.to(dev)[:, None] + torch.arange(h, device=dev)
    cols = torch.arange(w, device=dev).expand(n, w)
    cols = torch.where(flip.to(dev)[:, None], cols.flip(1), cols) + dx.to(dev)[:, None]
    out = padded[torch.arange(n, device=dev)[:, None, None], :, rows[:, :, None], cols[:, None, :]]
    return out.permute(0, 3, 1, 2).contiguous()  # advanced indexing put C last


def check(on, padding) -> None:
    """A ValueError naming a bad ``augment`` or ``augment_padding`` value of a training config."""
    if not isinstance(on, bool):
        raise ValueError(f"training augment={on!r}: allowed: true, false")
    if isinstance(padding, bool) or not isinstance(padding, int) or padding < 0:
        raise ValueError(f"training augment_padding={padding!r}: allowed: an integer >= 0")


def check_images(shape) -> None:
    """A ValueError unless inputs of ``shape`` (one sample's) are images ``(C, H, W)``."""
    if len(shape) != 3:
        raise ValueError(f"training augment: true needs image inputs (C, H, W); this dataset's "
                         f"inputs have shape {tuple(shape)} (use an image dataset, e.g. cifar10, "
                         "or digits with image: true, or augment: false)")


def batch_inputs(x: torch.Tensor, seed: int, step: int, padding: int,
                 input_shape=None, draws=None) -> torch.Tensor:
    """The augmented images of update ``step``: ``x`` the batch's training inputs, in order,
    stored as images or flat (``input_shape``, the dataset's ``(C, H, W)``, says how to read
    them); returned in ``x``'s own shape. ``draws``: that step's ``draw`` already made (the
    trainer's :class:`Plan`, on ``x``'s device)."""
    shape = tuple(input_shape) if input_shape is not None else tuple(x.shape[1:])
    check_images(shape)
    images = x.reshape(len(x), *shape)
    if draws is None:
        draws = draw(len(x), padding, seed, step)
    return crop_flip(images, *draws, padding).reshape(x.shape)


class Plan:
    """The trainer's draws: those of ``block`` consecutive steps (an epoch) made at once on the
    CPU (each step's from its own generator, so the numbers are :func:`draw`'s) and copied to
    ``device`` in one transfer (from pinned memory, asynchronously, on CUDA): no host-device
    sync per step."""

    def __init__(self, n: int, padding: int, seed: int, block: int, device) -> None:
        self.n, self.padding, self.seed, self.block = n, padding, int(seed), max(1, int(block))
        self.device, self.start, self.rows = torch.device(device), -1, None

    def at(self, step: int) -> tuple[torch.Tensor, ...]:
        """``draw(n, padding, seed, step)`` on the device."""
        if self.rows is None or not self.start <= step < self.start + len(self.rows):
            steps = range(step, step + self.block)
            cpu = torch.stack([torch.stack([dy, dx, flip.long()]) for dy, dx, flip in (
                draw(self.n, self.padding, self.seed, t) for t in steps)])
            if self.device.type == "cuda":
                cpu = cpu.pin_memory()
            self.rows = cpu.to(self.device, non_blocking=True)
            self.start = step
        dy, dx, flip = self.rows[step - self.start]
        return dy, dx, flip.bool()


def update_inputs(x: torch.Tensor, spec, step: int, input_shape=None) -> torch.Tensor:
    """The inputs update ``step`` of the run ``spec`` (a :class:`bnstudy.train.spec.RunSpec`)
    trained on: ``x``, its batch's training inputs, augmented as the trainer did when the run's
    training config has ``augment: true``, else ``x`` itself."""
    cfg = spec.training
    if not cfg.augment:
        return x
    return batch_inputs(x, spec.seed, step, cfg.augment_padding, input_shape)
