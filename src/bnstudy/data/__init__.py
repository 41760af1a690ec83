"""Datasets: generators and loaders, one registry, one on-disk format.

Each dataset is prepared once into an ``.npz`` file holding ``x_train, y_train, x_test, y_test``
(float32 inputs; int64 labels for classification, float32 targets for regression) and a JSON
``meta`` entry (task, number of classes or output dimension, input shape, options).

- ``star2d``: BN-Explained Fig. 3's 2-D star: points along ``n_arms`` rays from the origin,
  with Gaussian jitter; label = arm index mod 2 (alternating arms; ``n_arms`` must be even).
- ``gaussian_linear``: Santurkar App. A's DLN task: x ~ N(0, I_d), y = A x, A_ij ~ N(0, 1).
- ``digits``: scikit-learn's bundled 8x8 digits, stratified split.
- ``teacher_student``: Luo et al. §4 / App. D: x ~ N(0, I/N), a linear teacher w* with
  ||w*||^2 / N = 1, training targets w*^T x + s with s ~ N(0, S) fixed per example, P =
  round(alpha N) training samples; test targets are noise-free (w*^T x), so the test MSE is Luo's
  generalization error (Eq. 16-17). Teacher, training inputs, training noise and test set come
  from separate streams of ``seed``: the teacher and the test set do not depend on alpha, and the
  training set of a smaller load is a prefix of a larger one's.
- ``arrays``, ``image_folder``, ``function``: a user's own data, an ``.npz`` of the four arrays,
  a folder of class subfolders of images, or a function of theirs named by import path
  (:mod:`bnstudy.data.user`).
- ``mnist``, ``cifar10``, ``cifar100``, ``svhn``: the real image sets, read from their standard
  files in ``data_dir`` (downloaded there when ``download: true`` and the network allows it;
  :mod:`bnstudy.data.files`); ``cifar100``'s ``label`` picks its 100 fine or 20 coarse classes.

The image kinds (``digits`` and the real sets) are standardized per channel by their training
split unless ``standardize: false`` (:mod:`bnstudy.data.images`; ``meta["standardized"]``).
"""

from __future__ import annotations

import functools
import inspect
import json
import math
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bnstudy.data import files as realdata
from bnstudy.data import images, npz, user
from bnstudy.data.option import BadOption, Option
from bnstudy.io import REDO, CorruptFile, array_digest, atomic_path


@dataclass
class Dataset:
    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    meta: dict

    @property
    def task(self) -> str:
        return self.meta["task"]

    @property
    def input_shape(self) -> tuple:
        return tuple(self.meta["input_shape"])

    @property
    def out_dim(self) -> int:
        return int(self.meta["out_dim"])

    def split(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        if name not in ("train", "test"):
            raise ValueError(f"unknown split {name!r}; valid choices: train, test")
        return (self.x_train, self.y_train) if name == "train" else (self.x_test, self.y_test)


def _star2d(n_train=200, n_test=200, n_arms=6, noise=0.05, length=1.0, seed=0) -> Dataset:
    if n_arms < 2 or n_arms % 2:
        raise ValueError(f"star2d n_arms must be even and >= 2 (alternating labels), got {n_arms}")
    rng = np.random.default_rng(seed)
    n = n_train + n_test
    arm = rng.integers(0, n_arms, size=n)
    radius = rng.uniform(0.1, 1.0, size=n) * length
    angle = 2 * np.pi * arm / n_arms
    x = np.stack([radius * np.cos(angle), radius * np.sin(angle)], axis=1)
    x = x + noise * rng.standard_normal(x.shape)
    y = (arm % 2).astype(np.int64)
    meta = {"task": "classification", "out_dim": 2, "input_shape": [2]}
    return Dataset(x[:n_train], y[:n_train], x[n_train:], y[n_train:], meta)


def _gaussian_linear(n_train=1000, n_test=1000, dim=10, seed=0) -> Dataset:
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((dim, dim))
    x = rng.standard_normal((n_train + n_test, dim))
    y = x @ a.T
    meta = {"task": "regression", "out_dim": dim, "input_shape": [dim]}
    return Dataset(x[:n_train], y[:n_train], x[n_train:], y[n_train:], meta)


def teacher_weights(N: int, seed: int) -> np.ndarray:
    """Luo's teacher w* for ``teacher_student``: a random direction with ||w*||^2 / N = 1."""
    rng = np.random.default_rng(np.random.SeedSequence(seed).spawn(4)[0])
    w = rng.standard_normal(N)
    return w * np.sqrt(N) / np.linalg.norm(w)


def _teacher_student(N=100, alpha=2.0, S=0.25, n_test=10000, seed=0) -> Dataset:
    if not (isinstance(N, int) and N >= 1):
        raise ValueError(f"teacher_student N must be an int >= 1, got {N!r}")
    P = int(round(alpha * N))
    if P < 1 or S < 0 or n_test < 1:
        raise ValueError(f"teacher_student needs alpha * N >= 1, S >= 0 and n_test >= 1; got "
                         f"alpha={alpha!r}, N={N}, S={S!r}, n_test={n_test!r}")
    _, r_x, r_s, r_test = (np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(4))
    w = teacher_weights(N, seed)
    x = r_x.standard_normal((P, N)) / np.sqrt(N)
    y = x @ w + np.sqrt(S) * r_s.standard_normal(P)
    xt = r_test.standard_normal((n_test, N)) / np.sqrt(N)
    meta = {"task": "regression", "out_dim": 1, "input_shape": [N], "alpha_effective": P / N,
            "noise_variance": float(S)}
    return Dataset(x, y[:, None], xt, (xt @ w)[:, None], meta)


def _dataset(generator: Callable) -> Callable[..., Dataset]:
    """An image generator of :mod:`bnstudy.data.images` returning a :class:`Dataset` (same
    signature, so its defaults are the kind's)."""
    @functools.wraps(generator)
    def make(**options) -> Dataset:
        return Dataset(*generator(**options))

    return make


GENERATORS: dict[str, Callable[..., Dataset]] = {
    "star2d": _star2d,
    "gaussian_linear": _gaussian_linear,
    "digits": _dataset(images.digits),
    "teacher_student": _teacher_student,
    "mnist": _dataset(images.real("mnist")),
    "cifar10": _dataset(images.real("cifar10")),
    "cifar100": _dataset(images.cifar100),
    "svhn": _dataset(images.real("svhn")),
    "arrays": _dataset(user.arrays),
    "image_folder": _dataset(user.image_folder),
    "function": _dataset(user.function),
}
USER_KINDS = ("arrays", "image_folder", "function")  # a user's own data (bnstudy.data.user)


def kinds() -> list[str]:
    return sorted(GENERATORS)


_SIZE, _SEED = Option("int", 1), Option("int", 0)
_REAL = {"data_dir": Option("str"), "download": Option("bool"),
         "n_train": Option("int", 1, nullable=True), "n_test": Option("int", 1, nullable=True),
         "seed": _SEED, "standardize": Option("bool")}
# Every kind's options (the keyword arguments of its generator, whose defaults apply).
OPTIONS: dict[str, dict[str, Option]] = {
    "star2d": {"n_train": _SIZE, "n_test": _SIZE, "n_arms": Option("int", 2, even=True),
               "noise": Option("number", 0), "length": Option("number", 0, exclusive_min=True),
               "seed": _SEED},
    "gaussian_linear": {"n_train": _SIZE, "n_test": _SIZE, "dim": _SIZE, "seed": _SEED},
    "digits": {"test_fraction": Option("number", 0, exclusive_min=True, maximum=1),
               "seed": _SEED, "image": Option("bool"), "standardize": Option("bool")},
    "teacher_student": {"N": _SIZE, "alpha": Option("number", 0, exclusive_min=True),
                        "S": Option("number", 0), "n_test": _SIZE, "seed": _SEED},
    "mnist": _REAL,
    "cifar10": _REAL,
    "cifar100": {**_REAL, "label": Option("str", choices=realdata.CIFAR100_LABELS)},
    "svhn": _REAL,
    "arrays": {"path": Option("str"), "task": Option("str", choices=user.TASKS),
               "n_train": Option("int", 1, nullable=True),
               "n_test": Option("int", 1, nullable=True), "seed": _SEED,
               "standardize": Option("bool")},
    "function": {"source": Option("str"), "task": Option("str", choices=user.TASKS),
                 "n_train": Option("int", 1, nullable=True),
                 "n_test": Option("int", 1, nullable=True), "seed": _SEED,
                 "standardize": Option("bool")},
    "image_folder": {"folder": Option("str"), "size": Option("int", 1, maximum=1025),
                     "grayscale": Option("bool"), "n_train": Option("int", 1, nullable=True),
                     "n_test": Option("int", 1, nullable=True), "seed": _SEED,
                     "standardize": Option("bool")},
}
DIGITS_SIZE, DIGITS_CLASSES = 1797, 10  # scikit-learn's bundled digits
REAL_SIZES = {"mnist": (60000, 10000, (1, 28, 28)), "cifar10": (50000, 10000, (3, 32, 32)),
              "cifar100": (50000, 10000, (3, 32, 32)), "svhn": (73257, 26032, (3, 32, 32))}


def _with_defaults(kind: str, options: dict) -> dict:
    params = inspect.signature(GENERATORS[kind]).parameters
    return {**{k: p.default for k, p in params.items()}, **options}


def check_options(kind: str, options: dict | None) -> dict:
    """``options`` checked against ``kind``'s declared options (:class:`BadOption` names the
    bad one and what is allowed); returns them with the defaults filled in."""
    if kind not in GENERATORS:
        raise ValueError(f"unknown dataset kind {kind!r}; valid choices: {', '.join(kinds())}")
    declared = OPTIONS[kind]
    for key, v in (options or {}).items():
        if key not in declared:
            raise BadOption(kind, key, v, f"one of the option names {sorted(declared)}")
        if not declared[key].ok(v):
            raise BadOption(kind, key, v, declared[key].allowed())
    o = _with_defaults(kind, dict(options or {}))
    if kind == "teacher_student" and round(o["alpha"] * o["N"]) < 1:
        raise BadOption(kind, "alpha", o["alpha"], f"alpha * N >= 1 (N = {o['N']})")
    if kind == "digits":
        n_test = math.ceil(o["test_fraction"] * DIGITS_SIZE)
        if min(n_test, DIGITS_SIZE - n_test) < DIGITS_CLASSES:
            raise BadOption(kind, "test_fraction", o["test_fraction"],
                            f"a fraction leaving >= {DIGITS_CLASSES} of the {DIGITS_SIZE} digits "
                            "in each split (stratified)")
    return o


def n_train(kind: str, options: dict | None) -> int:
    """The training-set size ``make(kind, options)`` gives, from the options alone."""
    o = check_options(kind, options)
    if kind in ("star2d", "gaussian_linear"):
        return o["n_train"]
    if kind == "digits":
        return DIGITS_SIZE - math.ceil(o["test_fraction"] * DIGITS_SIZE)
    if kind == "teacher_student":
        return int(round(o["alpha"] * o["N"]))
    if kind in USER_KINDS:
        return user.describe(kind, o)["n_train"]
    full = REAL_SIZES[kind][0]
    return full if o["n_train"] is None else min(o["n_train"], full)


def shape(kind: str, options: dict | None) -> tuple[tuple, int]:
    """``(input_shape, out_dim)`` of ``make(kind, options)``, from the options alone."""
    o = check_options(kind, options)
    if kind == "star2d":
        return (2,), 2
    if kind == "gaussian_linear":
        return (o["dim"],), o["dim"]
    if kind == "digits":
        return ((1, 8, 8) if o["image"] else (64,)), 10
    if kind == "teacher_student":
        return (o["N"],), 1
    if kind in USER_KINDS:
        d = user.describe(kind, o)
        return d["input_shape"], d["out_dim"]
    if kind == "cifar100":
        return REAL_SIZES[kind][2], 20 if o["label"] == "coarse" else 100
    return REAL_SIZES[kind][2], 10


def make(kind: str, options: dict | None = None) -> Dataset:
    """Generate or load dataset ``kind`` with ``options`` (keyword arguments of its generator)."""
    check_options(kind, options)
    options = dict(options or {})
    ds = GENERATORS[kind](**options)
    ds.meta.update({"kind": kind, "options": options})
    ds.x_train = ds.x_train.astype(np.float32)
    ds.x_test = ds.x_test.astype(np.float32)
    if ds.task == "regression":
        ds.y_train, ds.y_test = ds.y_train.astype(np.float32), ds.y_test.astype(np.float32)
    return ds


_ARRAYS = ("x_train", "y_train", "x_test", "y_test")


def save(ds: Dataset, path: str | Path) -> None:
    """Write ``ds`` atomically, with a SHA-256 of its arrays and meta (verified by :func:`load`)."""
    arrays = {k: getattr(ds, k) for k in _ARRAYS}
    meta = json.dumps(ds.meta)
    with atomic_path(path) as tmp, open(tmp, "wb") as fh:
        np.savez(fh, **arrays, meta=np.array(meta), sha256=np.array(array_digest(arrays, meta)))


def load(path: str | Path) -> Dataset:
    """The dataset at ``path``; :class:`bnstudy.io.CorruptFile` names a corrupt, truncated or
    foreign file (its checksum is verified)."""
    try:
        got = npz.read(path, (*_ARRAYS, "meta", "sha256"))  # declared sizes checked first
        arrays = {k: got[k] for k in _ARRAYS}
        meta, want = str(got["meta"]), str(got["sha256"])
    except (FileNotFoundError, CorruptFile):
        raise
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as e:
        raise CorruptFile(f"{path} is corrupt, truncated or not a bnstudy dataset "
                          f"({type(e).__name__}: {e}); {REDO}") from None
    if array_digest(arrays, meta) != want:
        raise CorruptFile(f"{path} is corrupt: its content does not match the checksum stored "
                          f"in it; {REDO}")
    return Dataset(*(arrays[k] for k in _ARRAYS), json.loads(meta))
