"""Figure families and report sections, by name.

A :class:`Family` draws one figure from one or more aggregated tables, optionally restricted to
one experiment. A :class:`Section` groups families in the report with the text that says what the
figures measure and what to look for, and names the table columns summarized over seeds.
Each module of this package registers its families and its section; :func:`render` (one figure)
and :func:`render_all` (every figure of a family, its tables read once) are what the ``plot``
CLI verb calls. Importing this package and its modules imports neither matplotlib nor seaborn
(see :mod:`bnstudy.lazy`): the workflow reads the registry when it parses the Snakefile.
"""

from __future__ import annotations

import importlib
import io as _io
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass, field

import pandas as pd

from bnstudy import lazy
from bnstudy.io import atomic_path, read_table  # the one reader: checksum verified
from bnstudy.plots.colors import norm_color, norm_marker, norm_markers, norm_palette  # noqa: F401
from bnstudy.plots.style import (  # noqa: F401 (re-exported: what plot modules draw with)
    FULL_WIDTH,
    LABELS,
    class_cmap,
    figure,
    finish,
    label,
    message,
    norm_order,
    seed_ci,
    set_width,
    step_axis,
    title,
)

# Imported on first use (Agg backend), so that the registry is cheap to import: the workflow
# reads it when it parses the Snakefile. See bnstudy.lazy.
plt = lazy.module("matplotlib.pyplot")
sns = lazy.module("seaborn")


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
    # a column whose values are the figure's points (the lr sweep's ``lr``): the seeds per arm
    # are stated per value (seeds_note), as the runs behind each point differ
    seeds_by: str | None = None


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
    rank: int = 1000  # the report's order: by rank, then key (the question, not the module)


FAMILIES: dict[str, Family] = {}
SECTIONS: dict[str, Section] = {}


def register(family: Family) -> Family:
    FAMILIES[family.name] = family
    return family


def register_section(section: Section) -> Section:
    SECTIONS[section.key] = section
    return section


def _discover() -> tuple[str, ...]:
    """The modules of this package that register a figure family or a report section (every
    module is imported; the drawing helpers register nothing): adding a figure is adding its
    module, with no list to edit."""
    found = []
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        before = (len(FAMILIES), len(SECTIONS))
        importlib.import_module(f"{__name__}.{info.name}")
        if (len(FAMILIES), len(SECTIONS)) != before:
            found.append(info.name)
    return tuple(found)


_MODULES: tuple[str, ...] | None = None


def load_all() -> None:
    global _MODULES
    if _MODULES is None:
        _MODULES = _discover()


def __getattr__(name: str):
    if name == "MODULES":  # the registering modules, discovered on first use
        load_all()
        return _MODULES
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def get(name: str) -> Family:
    load_all()
    if name not in FAMILIES:
        raise ValueError(f"unknown figure family {name!r}; valid choices: {sorted(FAMILIES)}")
    return FAMILIES[name]


def style(options: dict) -> None:
    sns.set_theme(context=options.get("context", "notebook"), style="whitegrid",
                  palette=options.get("palette", "colorblind"))
    set_width(options.get("width"))
    # laid out at the resolution it is saved at: the layout's text extents are those the PNG
    # draws, and matplotlib measures each text once instead of once per resolution
    plt.rcParams["figure.dpi"] = options.get("dpi", 110)


# Vector copies beside the PNG (the report embeds the PNG), without the creation date that
# matplotlib would write and with fixed SVG element ids (svg.hashsalt): the same tables give the
# same bytes. Fonts are embedded as TrueType (Type 42), not Type 3, which journals' PDF checks
# reject.
EXPORTS = {"pdf": {"CreationDate": None}, "svg": {"Date": None}}
SAVE_RC = {"svg.hashsalt": "bnstudy", "pdf.fonttype": 42, "ps.fonttype": 42}
RUN_KEYS = ("norm", "seed")
DRAW_SEED = 0  # NumPy's global generator while a figure is drawn (strip plots' jitter): _drawn


def _arms_text(f: pd.DataFrame) -> str:
    n = f.groupby("norm", sort=False)["seed"].nunique()
    order = [k for k in ("none",) if k in n.index] + sorted(set(n.index) - {"none"})
    if n.nunique() == 1:
        return f"{int(n.iloc[0])} each ({', '.join(order)})"
    return ", ".join(f"{k} {int(n[k])}" for k in order)


def seeds_note(frames: list[pd.DataFrame], by: str | None = None) -> str:
    """'seeds per arm: none 12, batchnorm 12, layernorm 3' from the first table with runs
    (normalizer and seed columns; 'each' when every arm has as many), '' without one; with
    ``by`` (a column of that table), per value of it: 'seeds per arm: lr 0.001: 3 each (none,
    batchnorm); lr 0.01: none 12, batchnorm 12'."""
    for f in frames:
        if set(RUN_KEYS) <= set(f.columns) and len(f):
            if by is None or by not in f.columns or f[by].nunique() < 2:
                return f"seeds per arm: {_arms_text(f)}"
            return "seeds per arm: " + "; ".join(f"{by} {v:g}: {_arms_text(g)}" if isinstance(
                v, float) else f"{by} {v}: {_arms_text(g)}" for v, g in f.groupby(by))
    return ""


def place_note(fig, note: str):
    """``note`` under the figure's lower right corner, below everything drawn (a colour bar's
    label at the bottom edge of a constrained layout included: the partition-density maps'
    fourth bar), so it never overprints. Returns the text and the figure's tight box with it
    (inches, unpadded): what ``savefig(bbox_inches="tight")`` would measure, which
    :func:`_save` passes to the PNG instead of laying the figure out twice more."""
    from matplotlib.transforms import Bbox

    fig.draw_without_rendering()  # lays the figure out (no pixels): where its lowest artist ends
    renderer = fig.canvas.get_renderer()
    box = fig.get_tightbbox(renderer)
    y = min(0.0, box.y0 / fig.get_figheight()) - 0.004
    text = fig.text(0.995, y, note, ha="right", va="top", fontsize="small", color="#444")
    extent = text.get_window_extent(renderer).transformed(fig.dpi_scale_trans.inverted())
    return text, Bbox.union([box, extent])


def export_paths(png: str, options: dict) -> list[str]:
    """The files one figure is written to: ``png`` and, for each of ``options["formats"]``
    (``pdf``, ``svg``), the same path with that suffix."""
    stem = str(png)[: -len(".png")] if str(png).endswith(".png") else str(png)
    return [str(png), *(f"{stem}.{f}" for f in options.get("formats", []))]


def _restrict(frames: list[pd.DataFrame], experiment, tables) -> list[pd.DataFrame]:
    """``frames`` restricted to ``experiment``'s rows (all of them when it is None)."""
    if experiment is None:
        return frames
    frames = [f[f["experiment"] == experiment] if "experiment" in f else f for f in frames]
    if all(len(f) == 0 for f in frames):
        raise ValueError(f"no rows for experiment {experiment!r} in {tables}")
    return frames


def _drawn(family: Family, frames: list[pd.DataFrame], options: dict):
    """``family.draw``'s figure, drawn with NumPy's global generator seeded (:data:`DRAW_SEED`):
    seaborn's strip plots jitter their dots from it, so an unseeded draw gave other bytes on
    every run from the same tables. The caller's generator state is put back afterwards."""
    import numpy as np

    state = np.random.get_state()
    np.random.seed(DRAW_SEED)
    try:
        return family.draw(frames, options)
    finally:
        np.random.set_state(state)


def _save(family: Family, frames: list[pd.DataFrame], out, options: dict) -> None:
    style(options)
    fig = _drawn(family, frames, options)
    note = seeds_note(frames, family.seeds_by)
    box = "tight"
    if note:  # every figure states the seeds behind each arm, under its lower right corner
        pad = plt.rcParams["savefig.pad_inches"]
        box = place_note(fig, note)[1].padded(pad, pad)  # the PNG's "tight" box, measured once
    for path in export_paths(out, options):
        fmt = str(path).rsplit(".", 1)[-1]
        with atomic_path(path) as tmp, plt.rc_context(SAVE_RC):
            if fmt == "png":
                tmp.write_bytes(_png(fig, options.get("dpi", 110), box))
            else:  # measured by the vector backend itself (its text extents differ slightly)
                fig.savefig(tmp, dpi=options.get("dpi", 110), bbox_inches="tight", format=fmt,
                            metadata=EXPORTS.get(fmt))
    plt.close(fig)


def _png(fig, dpi: int, bbox="tight") -> bytes:
    """The figure as a PNG of at most 256 colours (median cut, no dithering): a third of the
    bytes of a true-colour PNG, with no visible change for line plots and heatmaps whose
    colour maps have 256 entries, so the report that embeds every figure stays a few MB."""
    from PIL import Image

    buf = _io.BytesIO()
    fig.savefig(buf, dpi=dpi, bbox_inches=bbox, format="png")
    image = Image.open(_io.BytesIO(buf.getvalue())).convert("RGB")
    out = _io.BytesIO()
    image.quantize(colors=256, method=Image.Quantize.MEDIANCUT,
                   dither=Image.Dither.NONE).save(out, "PNG", optimize=True)
    return out.getvalue()


def render(name: str, tables: list[str], out: str, options: dict, experiment=None) -> None:
    """Draw family ``name`` from ``tables`` (restricted to ``experiment`` unless None) to
    ``out``."""
    family = get(name)
    frames = [read_table(t) for t in tables]
    _save(family, _restrict(frames, experiment, tables), out, options)


def render_all(name: str, tables: list[str], outs: dict, options: dict) -> None:
    """Every figure of family ``name`` in one process: ``outs`` maps an experiment to its
    figure's path (an experiment-scope family) or ``None`` to the one figure of a study-scope
    family. The tables are read once; each figure is the one :func:`render` draws for that
    experiment, byte for byte. Nothing is drawn unless every experiment has rows."""
    family = get(name)
    if not isinstance(outs, dict) or not outs:
        raise ValueError(f"outs must be a non-empty mapping experiment -> output path, "
                         f"got {outs!r}")
    if family.scope == "study" and list(outs) != [None]:
        raise ValueError(f"figure family {name!r} is drawn once for the study: outs must be "
                         f"{{None: path}}, got experiments {list(outs)}")
    if family.scope != "study" and not all(isinstance(e, str) and e for e in outs):
        raise ValueError(f"figure family {name!r} is drawn per experiment: outs must map "
                         f"experiment names to paths, got {list(outs)}")
    paths = [str(o) for o in outs.values()]
    if len(set(paths)) != len(paths):
        raise ValueError(f"two experiments of figure family {name!r} share an output path: "
                         f"{paths}")
    frames = [read_table(t) for t in tables]
    restricted = {e: _restrict(frames, e, tables) for e in outs}
    for experiment, out in outs.items():
        _save(family, restricted[experiment], out, options)
