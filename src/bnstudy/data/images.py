"""The image datasets (``digits``, ``mnist``, ``cifar10``, ``cifar100``, ``svhn``) and their
per-channel standardization.

**Standardization** (option ``standardize``, default true for every image kind): each channel's
pixels are shifted and scaled by the mean and (ddof 0) standard deviation of that channel over
the training split the dataset returns (after ``n_train`` subsampling), computed in float64 and
applied to the training and the test split alike, as the papers' CIFAR pipelines do. So the
training split has per-channel mean 0 and standard deviation 1, and background pixels are no
longer exactly 0: without it the digits are in ``[0, 1]`` with mean 0.305 and 48.9% of their
pixels exactly 0, and a zero-bias network's 3x3 receptive fields over background have ``h = 0``
exactly at training images, which partition density would count as a property of BN. Rows are
channel-major (``C x H x W`` flattened; the flat 64-pixel digits are one channel). A channel
that is constant over the training split is only shifted. ``standardize: false`` keeps the
pixels in ``[0, 1]``. The dataset's ``meta`` records ``standardized`` and the per-channel
``channel_mean``/``channel_std`` used (in ``[0, 1]`` pixel units).

Each generator returns ``(x_train, y_train, x_test, y_test, meta)``; :mod:`bnstudy.data` wraps
them into its ``Dataset`` under the same signature (whose defaults are the kind's defaults).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from bnstudy.data import files as realdata


def standardize(x_train: np.ndarray, x_test: np.ndarray, channels: int
                ) -> tuple[np.ndarray, np.ndarray, list[float], list[float]]:
    """``(x_train, x_test)`` standardized per channel by ``x_train``'s statistics (rows
    channel-major with ``channels`` channels), and those per-channel means and stds."""
    per = np.asarray(x_train, dtype=np.float64).reshape(len(x_train), channels, -1)
    mean, std = per.mean(axis=(0, 2)), per.std(axis=(0, 2))
    scale = np.where(std > 0, std, 1.0)

    def apply(x):
        z = (np.asarray(x, dtype=np.float64).reshape(len(x), channels, -1)
             - mean[None, :, None]) / scale[None, :, None]
        return z.reshape(x.shape).astype(np.float32)

    return apply(x_train), apply(x_test), mean.tolist(), std.tolist()


def _finish(xtr, ytr, xte, yte, meta: dict, on: bool):
    """The split, standardized when ``on`` (``meta`` records what was done)."""
    channels = meta["input_shape"][0] if len(meta["input_shape"]) == 3 else 1
    meta["standardized"] = bool(on)
    if on:
        xtr, xte, meta["channel_mean"], meta["channel_std"] = standardize(xtr, xte, channels)
    return xtr, ytr, xte, yte, meta


def digits(test_fraction=0.25, seed=0, image=True, standardize=True):
    """scikit-learn's bundled 8x8 digits (pixels / 16, in [0, 1]), stratified split."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    bunch = load_digits()
    x = bunch.data / 16.0
    y = bunch.target.astype(np.int64)
    xtr, xte, ytr, yte = train_test_split(
        x, y, test_size=test_fraction, random_state=seed, stratify=y
    )
    meta = {"task": "classification", "out_dim": 10, "input_shape": [1, 8, 8] if image else [64]}
    return _finish(xtr, ytr, xte, yte, meta, standardize)


def real_set(name: str, data_dir, download, n_train, n_test, seed, standardize, **kw):
    """A real image set read by :mod:`bnstudy.data.files`, subsampled, then standardized."""
    xtr, ytr, xte, yte, shape, classes = realdata.load(name, Path(data_dir), download, **kw)
    rng = np.random.default_rng(seed)
    if n_train is not None and n_train < len(xtr):
        keep = np.sort(rng.choice(len(xtr), n_train, replace=False))
        xtr, ytr = xtr[keep], ytr[keep]
    if n_test is not None and n_test < len(xte):
        keep = np.sort(rng.choice(len(xte), n_test, replace=False))
        xte, yte = xte[keep], yte[keep]
    meta = {"task": "classification", "out_dim": classes, "input_shape": list(shape)}
    return _finish(xtr, ytr, xte, yte, meta, standardize)


def real(name: str):
    """The generator of real set ``name`` (mnist, cifar10, svhn)."""
    def load(data_dir="data", download=False, n_train=None, n_test=None, seed=0,
             standardize=True):
        return real_set(name, data_dir, download, n_train, n_test, seed, standardize)

    return load


def cifar100(data_dir="data", download=False, n_train=None, n_test=None, seed=0, label="fine",
             standardize=True):
    return real_set("cifar100", data_dir, download, n_train, n_test, seed, standardize,
                    label=label)
