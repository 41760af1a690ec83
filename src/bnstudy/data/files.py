"""Readers (and optional downloaders) for the real image sets: MNIST and CIFAR-10.

Files are read from their standard distribution formats, without pickle:

- MNIST: ``<data_dir>/mnist/{train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz]``;
- CIFAR-10 (binary version): ``<data_dir>/cifar10/cifar-10-batches-bin/`` holding
  ``data_batch_1.bin`` ... ``data_batch_5.bin`` and ``test_batch.bin`` (or the
  ``cifar-10-binary.tar.gz`` archive placed in ``<data_dir>/cifar10/``).

With ``download=True`` missing files are fetched from the public mirrors. When they are missing
and cannot be fetched, :class:`DataUnavailable` says exactly which files to place where.
"""

from __future__ import annotations

import gzip
import tarfile
import urllib.request
from pathlib import Path

import numpy as np

MNIST_URL = "https://ossci-datasets.s3.amazonaws.com/mnist/"
MNIST_FILES = {
    "train_x": "train-images-idx3-ubyte",
    "train_y": "train-labels-idx1-ubyte",
    "test_x": "t10k-images-idx3-ubyte",
    "test_y": "t10k-labels-idx1-ubyte",
}
CIFAR_URL = "https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz"
CIFAR_TRAIN = [f"data_batch_{i}.bin" for i in range(1, 6)]
CIFAR_TEST = ["test_batch.bin"]


class DataUnavailable(RuntimeError):
    """A real dataset is not on disk and could not be downloaded."""


def _fetch(url: str, dest: Path) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_suffix(dest.suffix + ".part")
    try:
        with urllib.request.urlopen(url, timeout=30) as r, open(tmp, "wb") as fh:
            while chunk := r.read(1 << 20):
                fh.write(chunk)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise DataUnavailable(f"could not download {url} ({e})") from e
    tmp.replace(dest)


def read_idx(path: Path) -> np.ndarray:
    """Read an IDX file (MNIST's format), gzipped or not."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as fh:
        raw = fh.read()
    if raw[0] != 0 or raw[1] != 0 or raw[2] != 8:
        raise ValueError(f"{path} is not an unsigned-byte IDX file")
    ndim = raw[3]
    dims = [int.from_bytes(raw[4 + 4 * i: 8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def _mnist(root: Path, download: bool):
    root = root / "mnist"
    found = {}
    for key, stem in MNIST_FILES.items():
        for cand in (root / stem, root / f"{stem}.gz"):
            if cand.exists():
                found[key] = cand
                break
        else:
            if download:
                found[key] = root / f"{stem}.gz"
                _fetch(MNIST_URL + f"{stem}.gz", found[key])
    missing = [MNIST_FILES[k] for k in MNIST_FILES if k not in found]
    if missing:
        raise DataUnavailable(
            f"MNIST files missing in {root}: {', '.join(missing)} (plain or .gz). Place them "
            f"there, or set download: true for the dataset when the network allows it."
        )
    xtr = read_idx(found["train_x"]).astype(np.float32) / 255.0
    xte = read_idx(found["test_x"]).astype(np.float32) / 255.0
    ytr = read_idx(found["train_y"]).astype(np.int64)
    yte = read_idx(found["test_y"]).astype(np.int64)
    return xtr.reshape(len(xtr), -1), ytr, xte.reshape(len(xte), -1), yte, (1, 28, 28)


def read_cifar_bin(path: Path) -> tuple[np.ndarray, np.ndarray]:
    raw = np.fromfile(path, dtype=np.uint8).reshape(-1, 1 + 3072)
    return raw[:, 1:].astype(np.float32) / 255.0, raw[:, 0].astype(np.int64)


def _cifar10(root: Path, download: bool):
    root = root / "cifar10"
    batches = root / "cifar-10-batches-bin"
    archive = root / "cifar-10-binary.tar.gz"
    names = CIFAR_TRAIN + CIFAR_TEST
    if not all((batches / n).exists() for n in names):
        if not archive.exists() and download:
            _fetch(CIFAR_URL, archive)
        if archive.exists():
            with tarfile.open(archive) as tf:
                tf.extractall(root, filter="data")
    missing = [n for n in names if not (batches / n).exists()]
    if missing:
        raise DataUnavailable(
            f"CIFAR-10 (binary version) missing in {batches}: {', '.join(missing)}. Place the "
            f"extracted batches there or cifar-10-binary.tar.gz in {root}, or set download: true "
            f"for the dataset when the network allows it."
        )
    tr = [read_cifar_bin(batches / n) for n in CIFAR_TRAIN]
    xte, yte = read_cifar_bin(batches / CIFAR_TEST[0])
    xtr = np.concatenate([t[0] for t in tr])
    ytr = np.concatenate([t[1] for t in tr])
    mean = xtr.reshape(-1, 3, 1024).mean(axis=(0, 2)).repeat(1024)
    std = xtr.reshape(-1, 3, 1024).std(axis=(0, 2)).repeat(1024)
    return (xtr - mean) / std, ytr, (xte - mean) / std, yte, (3, 32, 32)


def load(name: str, data_dir: Path, download: bool):
    if name == "mnist":
        return _mnist(Path(data_dir), download)
    if name == "cifar10":
        return _cifar10(Path(data_dir), download)
    raise ValueError(f"unknown real dataset {name!r}; valid choices: mnist, cifar10")
