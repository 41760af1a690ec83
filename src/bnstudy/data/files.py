"""Readers (and optional downloaders) for the real image sets: MNIST, CIFAR-10, CIFAR-100, SVHN.

Files are read from their standard distribution formats, without pickle; pixels are returned in
``[0, 1]`` (standardization is :mod:`bnstudy.data.images`'s, by the training split it keeps):

- MNIST: ``<data_dir>/mnist/{train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz]``;
- CIFAR-10 (binary version): ``<data_dir>/cifar10/cifar-10-batches-bin/`` holding
  ``data_batch_1.bin`` ... ``data_batch_5.bin`` and ``test_batch.bin`` (or the
  ``cifar-10-binary.tar.gz`` archive placed in ``<data_dir>/cifar10/``); each record is 1 label
  byte and 3072 pixel bytes (1024 red, 1024 green, 1024 blue, rows of 32);
- CIFAR-100 (binary version): ``<data_dir>/cifar100/cifar-100-binary/{train,test}.bin`` (or
  ``cifar-100-binary.tar.gz`` in ``<data_dir>/cifar100/``); each record is 1 coarse label byte
  (20 superclasses), 1 fine label byte (100 classes) and the same 3072 pixel bytes;
- SVHN (format 2, cropped digits): ``<data_dir>/svhn/{train,test}_32x32.mat``, MATLAB files
  holding ``X`` (32, 32, 3, N) uint8 and ``y`` (N, 1) with labels 1..10, 10 meaning digit 0
  (read as label 0). The ``extra`` set is not used.

Checksums: the archives and the SVHN files are checked against their official MD5s (the CIFAR
page's table; torchvision's SVHN source), after a download and every time they are read, so a
truncated or foreign file stops with :class:`CorruptData`. The extracted CIFAR batches have no
published checksum: their record structure and label ranges are checked instead.

With ``download=True`` missing files are fetched from the public mirrors. When they are missing
and cannot be fetched, :class:`DataUnavailable` says exactly which files to place where.
"""

from __future__ import annotations

import gzip
import hashlib
import math
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
CIFAR100_URL = "https://www.cs.toronto.edu/~kriz/cifar-100-binary.tar.gz"
CIFAR100_LABELS = ("fine", "coarse")
SVHN_URL = "http://ufldl.stanford.edu/housenumbers/"
SVHN_FILES = ("train_32x32.mat", "test_32x32.mat")
# Official MD5s: the CIFAR archives from https://www.cs.toronto.edu/~kriz/cifar.html, the SVHN
# files from torchvision.datasets.SVHN.
MD5 = {
    "cifar-10-binary.tar.gz": "c32a1d4ab5d03f1284b67883e8d87530",
    "cifar-100-binary.tar.gz": "03b5dce01913d631647c71ecec9e9cb8",
    "train_32x32.mat": "e26dedcc434d2e4c54c9b2d4a06d8373",
    "test_32x32.mat": "eb5a983be6a315427106f1b164d9cef3",
}
PIXELS = 3 * 32 * 32


class DataUnavailable(RuntimeError):
    """A real dataset is not on disk and could not be downloaded."""


class CorruptData(DataUnavailable):
    """A real dataset's file is on disk but is not the official file (checksum or structure)."""


def md5sum(path: Path) -> str:
    h = hashlib.md5(usedforsecurity=False)
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 22):
            h.update(chunk)
    return h.hexdigest()


def verify(path: Path) -> None:
    """Raise :class:`CorruptData` unless ``path`` has its official MD5 (``MD5[path.name]``)."""
    want, got = MD5[path.name], md5sum(path)
    if got != want:
        raise CorruptData(f"{path} has MD5 {got}, not the official {want}: it is truncated, "
                          f"corrupt or another file. Delete it and place the official file "
                          f"there, or set download: true for the dataset.")


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
    if dest.name in MD5 and md5sum(tmp) != MD5[dest.name]:
        tmp.unlink()
        raise CorruptData(f"the download of {url} does not have the official MD5 "
                          f"{MD5[dest.name]}; try again, or place the official file at {dest}")
    tmp.replace(dest)


def read_idx(path: Path) -> np.ndarray:
    """Read an IDX file (MNIST's format), gzipped or not."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as fh:
        raw = fh.read()
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] != 8:
        raise ValueError(f"{path} is not an unsigned-byte IDX file")
    ndim = raw[3]
    dims = [int.from_bytes(raw[4 + 4 * i: 8 + 4 * i], "big") for i in range(ndim)]
    held = len(raw) - 4 - 4 * ndim
    if held < 0 or math.prod(dims) != held:  # checked before any array is made of it
        raise CorruptData(f"{path} is corrupt: its header declares {tuple(dims)} "
                          f"({math.prod(dims):,} bytes) but it holds {max(held, 0):,}")
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
    return xtr.reshape(len(xtr), -1), ytr, xte.reshape(len(xte), -1), yte, (1, 28, 28), 10


def read_cifar_bin(path: Path, classes: tuple[int, ...] = (10,), label: int = 0):
    """``(pixels in [0, 1], labels)`` of a CIFAR binary file whose records are one byte per
    entry of ``classes`` (each below its count) then 3072 pixel bytes; ``label`` picks the byte
    returned as the label. :class:`CorruptData` names a file that is not such records."""
    raw = np.fromfile(path, dtype=np.uint8)
    size = len(classes) + PIXELS
    if raw.size == 0 or raw.size % size:
        raise CorruptData(f"{path} holds {raw.size} bytes, not a whole number of {size}-byte "
                          f"records: it is truncated or not the CIFAR binary version")
    raw = raw.reshape(-1, size)
    for i, n in enumerate(classes):
        if raw[:, i].max() >= n:
            raise CorruptData(f"{path}: label byte {i} of a record is {raw[:, i].max()}, beyond "
                              f"the {n} classes: the file is not the CIFAR binary version")
    return raw[:, len(classes):].astype(np.float32) / 255.0, raw[:, label].astype(np.int64)


def extract(tf: tarfile.TarFile, root: Path) -> None:
    """Extract ``tf`` under ``root`` with tarfile's "data" filter; on a Python without it
    (before 3.11.4 / 3.10.12), with its rules checked here: regular files and folders only,
    each inside ``root``. Every member is checked before any is written: a bad one extracts
    nothing."""
    members = tf.getmembers()
    if hasattr(tarfile, "data_filter"):
        for m in members:
            tarfile.data_filter(m, str(root))  # raises tarfile.FilterError
        tf.extractall(root, members=members, filter="data")
        return
    top = Path(root).resolve()
    for m in members:
        where = (top / m.name).resolve()
        if not (m.isfile() or m.isdir()) or m.name.startswith("/") or (
                where != top and top not in where.parents):
            raise CorruptData(f"{tf.name}: member {m.name!r} is not a plain file or folder "
                              f"inside {root}: nothing extracted")
    tf.extractall(root, members=members)


def _cifar(root: Path, download: bool, title: str, archive: str, url: str, folder: str,
           train: list[str], test: str, classes: tuple[int, ...], label: int):
    batches, archive = root / folder, root / archive
    names = train + [test]
    if not all((batches / n).exists() for n in names):
        if not archive.exists() and download:
            _fetch(url, archive)
        if archive.exists():
            verify(archive)
            with tarfile.open(archive) as tf:
                extract(tf, root)
    missing = [n for n in names if not (batches / n).exists()]
    if missing:
        raise DataUnavailable(
            f"{title} (binary version) missing in {batches}: {', '.join(missing)}. Place the "
            f"extracted files there or {archive.name} in {root}, or set download: true "
            f"for the dataset when the network allows it."
        )
    tr = [read_cifar_bin(batches / n, classes, label) for n in train]
    xte, yte = read_cifar_bin(batches / test, classes, label)
    xtr = np.concatenate([t[0] for t in tr])
    ytr = np.concatenate([t[1] for t in tr])
    return xtr, ytr, xte, yte, (3, 32, 32), classes[label]


def read_svhn_mat(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """``(pixels in [0, 1] as channel-major rows, digit labels 0..9)`` of an SVHN format-2 file;
    :class:`CorruptData` names a file without its ``X`` (32, 32, 3, N) uint8 and ``y`` 1..10."""
    from scipy.io import loadmat

    try:
        m = loadmat(path, variable_names=["X", "y"])
    except (ValueError, OSError, TypeError) as e:
        raise CorruptData(f"{path} is not a readable MATLAB file ({e})") from None
    except MemoryError:  # a header declaring an absurd size (the MD5 is checked before this)
        raise CorruptData(f"{path}: its arrays could not be allocated (out of memory, or a "
                          "corrupt size in it)") from None
    x, y = m.get("X"), m.get("y")
    if (x is None or y is None or x.dtype != np.uint8 or x.ndim != 4
            or x.shape[:3] != (32, 32, 3) or y.size != x.shape[3]):
        raise CorruptData(f"{path} is not SVHN format 2: it needs X of shape (32, 32, 3, N) uint8 "
                          f"and y with N labels; got X {getattr(x, 'shape', None)} "
                          f"{getattr(x, 'dtype', '')}, y {getattr(y, 'shape', None)}")
    y = y.reshape(-1).astype(np.int64)
    if y.min() < 1 or y.max() > 10:
        raise CorruptData(f"{path}: SVHN labels must be 1..10 (10 = digit 0); found "
                          f"{y.min()}..{y.max()}")
    x = x.transpose(3, 2, 0, 1).reshape(len(y), PIXELS)  # (N, channel, row, column)
    return x.astype(np.float32) / 255.0, y % 10


def _svhn(root: Path, download: bool):
    root = root / "svhn"
    for name in SVHN_FILES:
        if not (root / name).exists() and download:
            _fetch(SVHN_URL + name, root / name)
    missing = [n for n in SVHN_FILES if not (root / n).exists()]
    if missing:
        raise DataUnavailable(
            f"SVHN (format 2, cropped digits) missing in {root}: {', '.join(missing)}. Place them "
            f"there (from {SVHN_URL}), or set download: true for the dataset when the network "
            f"allows it."
        )
    for name in SVHN_FILES:
        verify(root / name)
    xtr, ytr = read_svhn_mat(root / SVHN_FILES[0])
    xte, yte = read_svhn_mat(root / SVHN_FILES[1])
    return xtr, ytr, xte, yte, (3, 32, 32), 10


def load(name: str, data_dir: Path, download: bool, label: str = "fine"):
    """``(x_train, y_train, x_test, y_test, input_shape, n_classes)`` of real dataset ``name``
    (``label``: CIFAR-100's ``fine`` or ``coarse`` classes)."""
    root = Path(data_dir)
    if name == "mnist":
        return _mnist(root, download)
    if name == "cifar10":
        return _cifar(root / "cifar10", download, "CIFAR-10", "cifar-10-binary.tar.gz", CIFAR_URL,
                      "cifar-10-batches-bin", CIFAR_TRAIN, CIFAR_TEST[0], (10,), 0)
    if name == "cifar100":
        if label not in CIFAR100_LABELS:
            raise ValueError(f"unknown CIFAR-100 label {label!r}; valid choices: "
                             f"{', '.join(CIFAR100_LABELS)}")
        return _cifar(root / "cifar100", download, "CIFAR-100", "cifar-100-binary.tar.gz",
                      CIFAR100_URL, "cifar-100-binary", ["train.bin"], "test.bin", (20, 100),
                      1 if label == "fine" else 0)
    if name == "svhn":
        return _svhn(root, download)
    raise ValueError(f"unknown real dataset {name!r}; valid choices: mnist, cifar10, cifar100, "
                     f"svhn")
