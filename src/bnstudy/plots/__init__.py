"""Figure families and report sections, by name.

A :class:`Family` draws one figure from one or more aggregated tables, optionally restricted to
one experiment. A :class:`Section` groups families in the report with the text that says what the
figures measure and what to look for, and names the table columns summarized over seeds.
Each module of this package registers its families and its section; :func:`render` is what the
``plot`` CLI verb calls.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402

from ..io import atomic_path  # noqa: E402
from ..tables import mean_ci  # noqa: E402


def seed_ci(values) -> tuple[float, float]:
    """The band every figure draws: the 95% Student-t interval of the mean over seeds (runs),
    the interval the report's tables and the claims ledger print (seaborn's ``errorbar``
    callable). Deterministic, unlike seaborn's bootstrap; one value gives a zero-width band."""
    m, lo, hi, n = mean_ci(values)
    return (m, m) if n == 1 else (lo, hi)


@dataclass(frozen=True)
class Family:
    """A figure drawn from ``tables``.

    ``scope="experiment"``: one figure per experiment, from the tables restricted to it
    (``figures/<experiment>/<name>.png``); ``datasets`` limits it to those dataset kinds (None:
    all), ``skip_datasets`` leaves out kinds whose study figures already show it;
    ``in_experiment(config, experiment)`` (None: always) says whether the study's options give
    that experiment's tables the rows the figure draws (e.g. ``partition_density: {maps:
    false}`` leaves the map table empty), so that no figure is scheduled over an empty table.
    ``scope="study"``: one figure from the whole tables (``figures/study/<name>.png``), for
    analyses and cross-experiment comparisons; ``in_study(config)`` (None: always) says whether
    a study's config gives the figure anything to show, so that no study gets an empty figure.
    ``module``: the module of this package that draws it (its hash joins the plot rule's code
    version).
    """

    name: str
    draw: Callable[[list[pd.DataFrame], dict], plt.Figure]
    caption: str
    tables: tuple[str, ...]
    module: str
    datasets: tuple[str, ...] | None = None
    scope: str = "experiment"
    skip_datasets: tuple[str, ...] = ()
    in_study: Callable[[dict], bool] | None = None
    in_experiment: Callable[[dict, str], bool] | None = None


@dataclass(frozen=True)
class Section:
    """A report section. ``findings(frames)`` may return HTML-safe text stating the numbers
    (``frames`` maps table names to aggregated tables)."""

    key: str
    title: str
    text: str
    table: str
    families: tuple[str, ...]
    summary_columns: tuple[str, ...] = ()
    summary_filter: dict = field(default_factory=dict)
    findings: Callable[[dict[str, pd.DataFrame]], str] | None = None


FAMILIES: dict[str, Family] = {}
SECTIONS: dict[str, Section] = {}
# Report order: training, the core measures, then the papers' experiments.
MODULES = ("training", "lr_sweep", "generalization", "partition_density", "ics", "smoothness",
           "bn_jitter", "teacher_student", "teacher_student_findings", "dannemann")


def register(family: Family) -> Family:
    FAMILIES[family.name] = family
    return family


def register_section(section: Section) -> Section:
    SECTIONS[section.key] = section
    return section


def load_all() -> None:
    for m in MODULES:
        importlib.import_module(f"{__name__}.{m}")


def get(name: str) -> Family:
    load_all()
    if name not in FAMILIES:
        raise ValueError(f"unknown figure family {name!r}; valid choices: {sorted(FAMILIES)}")
    return FAMILIES[name]


def style(options: dict) -> None:
    sns.set_theme(context=options.get("context", "notebook"), style="whitegrid",
                  palette=options.get("palette", "colorblind"))


def render(name: str, tables: list[str], out: str, options: dict, experiment=None) -> None:
    family = get(name)
    frames = [pd.read_parquet(t) for t in tables]
    if experiment is not None:
        frames = [f[f["experiment"] == experiment] if "experiment" in f else f for f in frames]
        if all(len(f) == 0 for f in frames):
            raise ValueError(f"no rows for experiment {experiment!r} in {tables}")
    style(options)
    fig = family.draw(frames, options)
    with atomic_path(out) as tmp:
        fig.savefig(tmp, dpi=options.get("dpi", 110), bbox_inches="tight",
                    format=str(out).rsplit(".", 1)[-1])
    plt.close(fig)


def title(df: pd.DataFrame, what: str) -> str:
    """'<experiment>: <what> (<dataset> / <model>)' for a one-experiment frame."""
    first = df.iloc[0]
    return f"{first['experiment']}: {what} ({first['dataset']} / {first['model']})"


def norm_order(df: pd.DataFrame) -> list[str]:
    """Normalizers in a stable order: 'none' first, then alphabetical."""
    names = sorted(df["norm"].unique())
    return sorted(names, key=lambda n: (n != "none", n))
