"""A user's own data as dataset kinds: arrays in an ``.npz`` file, or an image folder.

- ``arrays``: an ``.npz`` file (``path``) holding ``x_train``, ``y_train``, ``x_test``,
  ``y_test`` (numeric arrays, no pickled objects: read with ``allow_pickle=False``). Inputs are
  ``(N, d)`` or ``(N, C, H, W)``; for ``task: classification`` the labels are integers 0..K-1
  (``K`` = the largest label + 1, over both splits), for ``task: regression`` the targets are
  ``(N,)`` or ``(N, k)`` numbers.
- ``function``: a user's function named by ``source`` (``path/to/file.py:attribute``,
  ``module:attribute`` or an entry point of group ``bnstudy.datasets``), called as
  ``f(seed=seed)`` and returning the same four arrays (a tuple or a mapping); its result is
  checked as an ``.npz``'s arrays are.
- ``image_folder``: ``<folder>/train/<class>/*`` and ``<folder>/test/<class>/*`` image files
  (PNG, JPEG, BMP, GIF), the classes the sorted names of ``train``'s subfolders; each image is
  converted to RGB (or grayscale with ``grayscale: true``) and resized to ``size`` x ``size``
  pixels, in ``[0, 1]``.

Both read only what they declare, bounded and checked as the built-in kinds are: the shapes,
sizes and label range come from the file's array headers (or the folder's listing) before any
array is loaded, so a study config naming a missing file, a file without the four arrays, arrays
whose lengths disagree, non-integer class labels or more numbers than ``limits.dataset_values``
fails in the config check with one line; reading then checks that every value is finite.
``n_train`` / ``n_test`` subsample a split (seeded), and ``standardize`` standardizes the inputs
per channel by the training split as the image kinds do (default: false for ``arrays``, true for
``image_folder``).
"""

from __future__ import annotations

import zipfile
from functools import lru_cache
from pathlib import Path

import numpy as np

from bnstudy.data import npz

ARRAYS = ("x_train", "y_train", "x_test", "y_test")
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".gif")
TASKS = ("classification", "regression")


class BadData(ValueError):
    """A user's data file or folder that does not hold what its kind declares."""


def _headers(path: str) -> dict[str, tuple[tuple, np.dtype]]:
    """``{array: (shape, dtype)}`` of the four arrays, from their .npy headers only."""
    p = Path(path)
    if not p.is_file():
        raise BadData(f"no file {str(p)!r} (relative to {Path.cwd()}); allowed: an .npz file "
                      f"holding {', '.join(ARRAYS)}")
    try:
        with zipfile.ZipFile(p) as z:
            names = {n.removesuffix(".npy"): n for n in z.namelist()}
            missing = [a for a in ARRAYS if a not in names]
            if missing:
                raise BadData(f"{p} lacks the arrays {missing}; allowed: an .npz file holding "
                              f"{', '.join(ARRAYS)} (np.savez)")
            out = {}
            for a in ARRAYS:
                with z.open(names[a]) as fh:
                    version = np.lib.format.read_magic(fh)
                    read = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                            else np.lib.format.read_array_header_2_0)
                    shape, _, dtype = read(fh)
                if dtype.hasobject or dtype.kind not in "biuf":
                    raise BadData(f"{p}: {a} has dtype {dtype}; allowed: numbers (bool, int, "
                                  "float), no objects")
                out[a] = (tuple(shape), dtype)
            return out
    except (zipfile.BadZipFile, ValueError, OSError) as e:
        if isinstance(e, BadData):
            raise
        raise BadData(f"{p} is not a readable .npz file ({type(e).__name__}: {e})") from None


@lru_cache(maxsize=16)
def _describe_arrays(path: str, task: str, mtime: float) -> dict:
    def labels():  # the labels only: K (declared sizes checked before allocating)
        z = npz.read(path, ["y_train", "y_test"])
        return [z["y_train"], z["y_test"]]

    return _check(_headers(path), path, task, labels)


def _check(h: dict, path: str, task: str, labels) -> dict:
    """What four arrays of shapes and dtypes ``h`` hold, checked against ``task``; ``labels()``
    gives the two label arrays (read only for classification)."""
    (xs, _), (xts, _) = h["x_train"], h["x_test"]
    if len(xs) not in (2, 4) or xs[1:] != xts[1:]:
        raise BadData(f"{path}: x_train {xs} and x_test {xts}; allowed: inputs (N, d) or "
                      "(N, C, H, W), the same per-example shape in both splits")
    for split in ("train", "test"):
        nx, ny = h[f"x_{split}"][0][0], h[f"y_{split}"][0]
        if not ny or ny[0] != nx or len(ny) > 2:
            raise BadData(f"{path}: x_{split} has {nx} rows, y_{split} shape {ny}; allowed: one "
                          "target per input row, (N,) or (N, k)")
        if nx < 1:
            raise BadData(f"{path}: x_{split} is empty; allowed: at least one example")
    if task == "classification":
        for split in ("train", "test"):
            shape, dtype = h[f"y_{split}"]
            if dtype.kind not in "iu" or len(shape) != 1:
                raise BadData(f"{path}: y_{split} is {dtype} of shape {shape}; allowed for task "
                              "classification: integer labels 0..K-1 of shape (N,)")
        ys = labels()
        lo, hi = min(int(y.min()) for y in ys), max(int(y.max()) for y in ys)
        if lo < 0 or hi < 1:
            raise BadData(f"{path}: labels span {lo}..{hi}; allowed: integers 0..K-1, K >= 2")
        out_dim = hi + 1
    else:
        ys = h["y_train"][0]
        out_dim = 1 if len(ys) == 1 else ys[1]
        if h["y_test"][0][1:] != ys[1:]:
            raise BadData(f"{path}: y_train {ys} and y_test {h['y_test'][0]} differ in width")
    values = sum(int(np.prod(s)) for s, _ in h.values())
    return {"n_train": xs[0], "n_test": xts[0], "input_shape": tuple(xs[1:]),
            "out_dim": int(out_dim), "values": values}


def _files(folder: Path, split: str, classes: list[str]) -> list[tuple[Path, int]]:
    out = []
    for k, c in enumerate(classes):
        d = folder / split / c
        if d.is_dir():
            out += [(f, k) for f in sorted(d.iterdir())
                    if f.is_file() and f.suffix.lower() in IMAGE_SUFFIXES]
    return out


@lru_cache(maxsize=16)
def _describe_folder(folder: str, size: int, grayscale: bool, mtime: float) -> dict:
    root = Path(folder)
    if not (root / "train").is_dir() or not (root / "test").is_dir():
        raise BadData(f"no folders {folder}/train and {folder}/test; allowed: a folder holding "
                      "train/<class>/<images> and test/<class>/<images>")
    classes = sorted(d.name for d in (root / "train").iterdir() if d.is_dir())
    extra = sorted(d.name for d in (root / "test").iterdir() if d.is_dir()
                   and d.name not in classes)
    if len(classes) < 2 or extra:
        raise BadData(f"{folder}: train classes {classes}, test-only classes {extra}; allowed: "
                      "at least 2 class folders under train/, test/ naming no other")
    ntr, nte = len(_files(root, "train", classes)), len(_files(root, "test", classes))
    if not ntr or not nte:
        raise BadData(f"{folder}: {ntr} training and {nte} test images; allowed: at least one "
                      f"of {', '.join(IMAGE_SUFFIXES)} in each split")
    c = 1 if grayscale else 3
    return {"n_train": ntr, "n_test": nte, "input_shape": (c, size, size),
            "out_dim": len(classes), "values": (ntr + nte) * (c * size * size + 1),
            "classes": classes}


@lru_cache(maxsize=4)
def _generated(target: str, seed: int, mtime: float) -> dict:
    """The four arrays a user's function ``target`` (``file.py:attribute`` or
    ``module:attribute``, :func:`bnstudy.user_code.resolve`) returns for ``seed``:
    ``f(seed=...)`` giving a mapping with ``x_train``, ``y_train``, ``x_test``, ``y_test`` or
    those four in a tuple."""
    from bnstudy import user_code

    fn = user_code.resolve(target, "bnstudy.datasets")
    if not callable(fn):
        raise BadData(f"{target!r} is a {type(fn).__name__}; allowed: a function f(seed) "
                      f"returning {', '.join(ARRAYS)}")
    try:
        out = fn(seed=seed)
    except Exception as e:  # noqa: BLE001 (the user's code: any error, named in one line)
        raise BadData(f"{target}(seed={seed}) raised {type(e).__name__}: {e}") from None
    if isinstance(out, dict):
        missing = [a for a in ARRAYS if a not in out]
        if missing:
            raise BadData(f"{target} returned a mapping without {missing}")
        out = [out[a] for a in ARRAYS]
    if not isinstance(out, (tuple, list)) or len(out) != 4:
        raise BadData(f"{target} returned a {type(out).__name__}; allowed: the four arrays "
                      f"{', '.join(ARRAYS)} (a tuple or a mapping)")
    arrays = {a: np.asarray(x) for a, x in zip(ARRAYS, out, strict=True)}
    for a, x in arrays.items():
        if x.dtype.hasobject or x.dtype.kind not in "biuf":
            raise BadData(f"{target}: {a} has dtype {x.dtype}; allowed: numbers")
    return arrays


def _mtime(path: str) -> float:
    p = Path(path)
    return p.stat().st_mtime if p.exists() else 0.0


def describe(kind: str, o: dict) -> dict:
    """What dataset ``kind`` with options ``o`` (defaults filled in) holds, from headers or the
    folder listing: ``n_train``, ``n_test`` (after subsampling), ``input_shape``, ``out_dim``,
    ``values`` (numbers, both splits); :class:`BadData` says what is wrong."""
    if kind in ("arrays", "function") and o["task"] not in TASKS:
        raise BadData(f"task {o['task']!r}; allowed: {', '.join(TASKS)}")
    if kind == "arrays":
        d = dict(_describe_arrays(o["path"], o["task"], _mtime(o["path"])))
    elif kind == "function":
        a = _generated(o["source"], o["seed"], _source_mtime(o["source"]))
        d = _check({k: (x.shape, x.dtype) for k, x in a.items()}, o["source"], o["task"],
                   lambda: [a["y_train"], a["y_test"]])
    else:
        d = dict(_describe_folder(o["folder"], o["size"], o["grayscale"], _mtime(o["folder"])))
    for split in ("n_train", "n_test"):
        if o[split] is not None:
            d[split] = min(d[split], o[split])
    return d


def _subsample(x, y, n, rng):
    if n is None or n >= len(x):
        return x, y
    keep = np.sort(rng.choice(len(x), n, replace=False))
    return x[keep], y[keep]


def _finish(xtr, ytr, xte, yte, d: dict, task: str, n_train, n_test, seed, on: bool):
    from bnstudy.data import images

    for name, a in (("inputs", xtr), ("inputs", xte), ("targets", ytr), ("targets", yte)):
        if not np.all(np.isfinite(a)):
            raise BadData(f"the {name} hold NaN or infinite values; allowed: finite numbers")
    rng = np.random.default_rng(seed)
    xtr, ytr = _subsample(xtr, ytr, n_train, rng)
    xte, yte = _subsample(xte, yte, n_test, rng)
    meta = {"task": task, "out_dim": d["out_dim"], "input_shape": list(d["input_shape"])}
    if task == "classification":
        ytr, yte = ytr.astype(np.int64), yte.astype(np.int64)
    else:
        ytr, yte = (y.reshape(len(y), -1).astype(np.float32) for y in (ytr, yte))
    return images._finish(xtr.astype(np.float32), ytr, xte.astype(np.float32), yte, meta,  # noqa: SLF001
                          on)


def arrays(path="data.npz", task="classification", n_train=None, n_test=None, seed=0,
           standardize=False):
    """The ``arrays`` kind: a user's .npz file (see the module docstring)."""
    o = {"path": path, "task": task, "n_train": n_train, "n_test": n_test}
    d = describe("arrays", o)
    z = npz.read(path, ARRAYS)  # declared sizes checked before allocating
    xtr, ytr, xte, yte = (np.asarray(z[a]) for a in ARRAYS)
    return _finish(xtr, ytr, xte, yte, d, task, n_train, n_test, seed, standardize)


def _source_mtime(target: str) -> float:
    """The modification time of the file a ``file.py:attribute`` target names (0 otherwise):
    an edited file is called again."""
    mod = target.rsplit(":", 1)[0]
    return _mtime(mod) if mod.endswith(".py") else 0.0


def function(source="my_data.py:make", task="classification", n_train=None, n_test=None,
             seed=0, standardize=False):
    """The ``function`` kind: a user's function ``source`` called with ``seed``, returning the
    four arrays (see the module docstring)."""
    o = {"source": source, "task": task, "n_train": n_train, "n_test": n_test, "seed": seed}
    d = describe("function", o)
    a = _generated(source, seed, _source_mtime(source))
    return _finish(*(a[k] for k in ARRAYS), d, task, n_train, n_test, seed, standardize)


def image_folder(folder="images", size=32, grayscale=False, n_train=None, n_test=None, seed=0,
                 standardize=True):
    """The ``image_folder`` kind: a user's folder of class subfolders (module docstring)."""
    from PIL import Image

    o = {"folder": folder, "size": size, "grayscale": grayscale, "n_train": n_train,
         "n_test": n_test}
    d = describe("image_folder", o)
    root = Path(folder)

    def read(split):
        xs, ys = [], []
        for f, k in _files(root, split, d["classes"]):
            try:
                with Image.open(f) as im:
                    im = im.convert("L" if grayscale else "RGB").resize((size, size))
                    a = np.asarray(im, dtype=np.float32) / 255.0
            except OSError as e:
                raise BadData(f"{f} is not a readable image ({e})") from None
            xs.append(a[None] if grayscale else a.transpose(2, 0, 1))
            ys.append(k)
        return np.stack(xs), np.asarray(ys, dtype=np.int64)

    (xtr, ytr), (xte, yte) = read("train"), read("test")
    return _finish(xtr, ytr, xte, yte, d, "classification", n_train, n_test, seed, standardize)
