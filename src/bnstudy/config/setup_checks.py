"""What a study's jobs would find out only when they run, checked before any job.

- :func:`check_results`: the results directory (``~`` expanded in place) lies under the working
  directory (unless ``results_anywhere: true``), is new, empty or already a bnstudy results
  directory (its marker, :data:`bnstudy.config.paths.RESULTS_MARKER`), and exists as a directory
  or can be created (a directory made and removed at once in its nearest existing parent shows
  it); no symbolic link on its way is a loop or dangling, no name in it too long
  (:mod:`bnstudy.config.paths`);
- :func:`check_datasets`: every dataset's ``seed`` fits the data split's generator
  (:data:`MAX_DATA_SEED`: scikit-learn and NumPy take 32-bit seeds); a real dataset's
  ``data_dir`` (``~`` expanded in place) is no file nor a broken link; with ``download`` off
  and jobs on this machine, its files are there (:func:`missing_files` names the missing ones);
- :func:`check_training_on_data`: a training's epoch milestones fall inside the run on its
  dataset, and ``augment`` runs on image inputs only;
- :func:`check_plots`: ``plots.palette`` is a palette seaborn knows.

Each failure is a :class:`~bnstudy.config.loader.ConfigError` naming the entry, the bad value and
what is allowed.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from bnstudy.config import paths
from bnstudy.config.loader import fail

MAX_DATA_SEED = 2**32 - 1  # numpy.random.RandomState / scikit-learn's random_state
REAL_KINDS = ("mnist", "cifar10", "cifar100", "svhn")


def check_path(key: str, path: Path) -> None:
    """No name in ``path`` is too long for the file system, and no symbolic link on its way is a
    loop or dangling (:mod:`bnstudy.config.paths`)."""
    long = paths.long_part(path)  # first: the system refuses to look such a name up
    if long:
        fail(key, f"{str(path)[:40]!r}...: the name {long[:24]!r}... is {len(long)} characters "
                  f"long; allowed: file and folder names of at most {paths.NAME_MAX} bytes")
    problem = paths.link_problem(path)
    if problem:
        fail(key, f"{str(path)!r}: {problem}; allowed: a directory path whose links lead to a "
                  "directory (fix or remove the link)")


def check_results(cfg: dict) -> None:
    given = cfg["results"]
    cfg["results"] = paths.expand(cfg["results"])  # "~/x": the home folder's x, not ./~/x
    r = Path(cfg["results"])
    check_path("results", r)
    shown = repr(given) + (f" (that is {cfg['results']!r})" if given != cfg["results"] else "")
    if not cfg.get("results_anywhere", False):
        where = paths.outside_workdir(r)
        if where is not None:
            fail("results", f"{shown} lies outside the working directory {where!r}; allowed: "
                            "a directory under it (such as results/<study>), or set "
                            "`results_anywhere: true` to write this study's results elsewhere")
    other = paths.foreign_content(r)
    if other is not None:
        fail("results", f"{shown} is an existing directory holding other files ({other}) and "
                        f"no bnstudy marker ({paths.RESULTS_MARKER}); allowed: a new or empty "
                        "directory, or one a bnstudy run made (the workflow writes its results "
                        "next to what is there and would mix with it)")
    for p in (r, *r.parents):
        if p.exists() and not p.is_dir():
            fail("results", f"{str(r)!r}: {str(p)!r} is an existing file, not a directory; "
                             "allowed: a directory path (new or existing)")
    existing = next(p for p in (r.absolute(), *r.absolute().parents) if p.exists())
    try:  # a probe, removed at once: permissions, read-only file systems, /proc alike
        os.rmdir(tempfile.mkdtemp(prefix=".bnstudy-probe-", dir=existing))
    except OSError as e:
        what = "is not writable" if existing == r.absolute() else "cannot be created"
        fail("results", f"{str(r)!r} {what}: {str(existing)!r} refuses a new directory "
                        f"({e.strerror or e}); allowed: a directory this user can write to")


def missing_files(kind: str, data_dir: str | Path) -> list[str]:
    """The files real dataset ``kind`` needs under ``data_dir`` that are not there (as
    :mod:`bnstudy.data.files` looks for them: a CIFAR archive stands for its batches, an MNIST
    file may be gzipped)."""
    from bnstudy.data import files

    root = Path(data_dir)
    if kind == "mnist":
        d = root / "mnist"
        return [str(d / f"{s}[.gz]") for s in files.MNIST_FILES.values()
                if not (d / s).exists() and not (d / f"{s}.gz").exists()]
    if kind in ("cifar10", "cifar100"):
        d = root / kind
        folder, archive, names = (
            ("cifar-10-batches-bin", "cifar-10-binary.tar.gz", files.CIFAR_TRAIN + files.CIFAR_TEST)
            if kind == "cifar10" else
            ("cifar-100-binary", "cifar-100-binary.tar.gz", ["train.bin", "test.bin"]))
        if (d / archive).exists():
            return []
        return [str(d / folder / n) for n in names if not (d / folder / n).exists()]
    d = root / "svhn"
    return [str(d / n) for n in files.SVHN_FILES if not (d / n).exists()]


def check_datasets(cfg: dict, local: bool) -> None:
    for name, ds in cfg["datasets"].items():
        opts = ds.get("options") or {}
        seed = opts.get("seed")
        if isinstance(seed, int) and not isinstance(seed, bool) and seed > MAX_DATA_SEED:
            fail(f"datasets.{name}.options.seed", f"got {seed}; allowed: an integer in "
                                                  f"0..{MAX_DATA_SEED} (2^32 - 1, the data "
                                                  "split's generator)")
        if ds["kind"] not in REAL_KINDS:
            continue
        if isinstance(opts.get("data_dir"), str) and opts["data_dir"].startswith("~"):
            opts["data_dir"] = paths.expand(opts["data_dir"])  # the home folder's, not ./~
        data_dir = Path(opts.get("data_dir", "data"))
        check_path(f"datasets.{name}.options.data_dir", data_dir)
        if data_dir.exists() and not data_dir.is_dir():
            fail(f"datasets.{name}.options.data_dir", f"{str(data_dir)!r} is a file; allowed: "
                                                      "a directory holding the dataset's files")
        if local and not opts.get("download", False):
            missing = missing_files(ds["kind"], data_dir)
            if missing:
                shown = ", ".join(missing[:3]) + (f" and {len(missing) - 3} more"
                                                  if len(missing) > 3 else "")
                fail(f"datasets.{name}", f"{ds['kind']} files missing with download: false: "
                     f"{shown}; allowed: place them there (README 'Real datasets') or set "
                     "options.download: true")


def check_training_on_data(where: str, tc, n_train: int, input_shape) -> None:
    """Training ``tc`` (a TrainConfig) on a dataset of ``n_train`` examples and inputs of
    ``input_shape``, for experiment ``where``."""
    from bnstudy.train import schedules

    if tc.augment and len(input_shape) != 3:
        fail(where, f"training augment: true needs image inputs (C, H, W); the dataset's "
                    f"inputs have shape {tuple(input_shape)}; allowed: augment: false here")
    if tc.lr_schedule == "step" and tc.lr_milestone_unit == "epoch" and tc.lr_milestones:
        per = schedules.steps_per_epoch(n_train, tc.batch_size)
        last = max(tc.lr_milestones)
        if last * per >= tc.steps:
            fail(where, f"training lr_milestones {list(tc.lr_milestones)} (epochs of {per} "
                        f"steps on {n_train} examples): epoch {last} starts at step "
                        f"{last * per}, past the run's last step {tc.steps - 1}; allowed: "
                        f"milestones at most epoch {(tc.steps - 1) // per}")


def check_plots(cfg: dict) -> None:
    settings = cfg.get("plots", {})
    families = settings.get("families")
    if families is not None:
        from bnstudy import plots

        plots.load_all()
        unknown = [f for f in families if f not in plots.FAMILIES]
        if unknown:
            fail("plots.families", f"unknown figure families {unknown}; allowed: "
                                   f"{sorted(plots.FAMILIES)}")
    palette = settings.get("palette", "colorblind")
    if palette == "colorblind":
        return
    import seaborn as sns

    try:
        sns.color_palette(palette)
    except (ValueError, TypeError):
        fail("plots.palette", f"got {palette!r}; allowed: a seaborn or matplotlib palette name "
                              "(e.g. colorblind, deep, muted, viridis, tab10)")
