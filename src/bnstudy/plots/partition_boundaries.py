"""The spline partition itself, as lines (BN-Explained Fig. 3): each layer's exact boundaries and
the whole network's, from the ``partition_boundaries`` table.

The density maps (:mod:`bnstudy.plots.partition_density`) show how many boundaries pass near a
location, on a 60 x 60 grid; this figure draws where they are, one boundary cell of the fine
grid (``boundary_resolution``, default 400 per axis) per mark, so that BN's translation and
folding of the partition towards the data reads as in the paper. Laid out as the density maps:
one column per layer group (first, middle and last kinked layer, all layers), one row per
normalizer x (initialization, last checkpoint), the first seed; the training points on top,
coloured by class.

Each boundary cell is a black square marker of the cell's size in the panel, at least a pixel
wide at the figure's ``dpi`` (Agg draws nothing for a smaller marker: at the report's 13 inches
and 110 dpi a 400-cell panel has some 300 pixels, so a cell-sized marker would vanish),
rasterized, so that the lines neither vanish nor thicken with the figure's width and the
vector copies stay small. A square image of the cell mask would drop whole rows of cells when
a panel has fewer pixels than the grid has cells (400 cells in some 300 pixels at 13 inches
and 110 dpi), breaking the lines.
"""

from __future__ import annotations

import pandas as pd

from bnstudy.measures.partition.options import Options as PartitionOptions
from bnstudy.plots import Family, class_cmap, figure, finish, norm_order, register, title
from bnstudy.plots.partition_scope import maps_measured

DATA = "data"
GROUPS = ("first", "middle", "last", "all")
HEIGHT = 2.7  # inches per panel row, as the density maps
PIXEL = 1.1  # the least boundary mark, in pixels


def layer_groups(layers: list[int]) -> dict[str, int]:
    """The layer index each column draws: the first, middle (``(L - 1) // 2``, 0-based, as the
    density maps) and last kinked layer, and 0 for ``all``."""
    layers = sorted(layers)
    if not layers:
        return {"all": 0}
    return {"first": layers[0], "middle": layers[(len(layers) - 1) // 2], "last": layers[-1],
            "all": 0}


def panels(cells: pd.DataFrame) -> list[tuple[str, str, int]]:
    """``(norm, stage, step)`` of each panel row: step 0 (``init``) and the run's last step
    (``final``, when after 0), normalizers in :func:`bnstudy.plots.norm_order`."""
    out = []
    for norm in (norm_order(cells) if len(cells) else []):
        steps = cells.loc[cells["norm"] == norm, "step"]
        out += [(norm, "init", 0)] if (steps == 0).any() else []
        last = int(steps.max())
        out += [(norm, "final", last)] if last > 0 else []
    return out


def _marker_area(fig, ax, resolution: float, dpi: float) -> float:
    """Square marker area (points^2) of one grid cell along the panel's wider side, at least
    one pixel wide at ``dpi`` (Agg draws nothing for a marker that snaps to less)."""
    box = ax.get_position()
    side = max(box.width * fig.get_figwidth(), box.height * fig.get_figheight()) * 72
    return max(side / max(resolution, 1.0), PIXEL * 72 / dpi) ** 2


def draw(frames, options):
    df = frames[0]
    seed = int(df["seed"].min())
    df = df[df["seed"] == seed]
    data = df[df["layer"] == DATA]
    cells = df[df["layer"] != DATA]
    groups = layer_groups([int(i) for i in cells["layer_index"].unique() if i > 0])
    cols = [g for g in GROUPS if g in groups]
    rows = panels(cells)
    fig, axes = figure(max(len(rows), 1), len(cols), height=HEIGHT)
    marks = []
    n_cls = int(data["label"].max()) + 1 if len(data) else 2
    span = pd.concat([cells[["x0", "x1"]], data[["x0", "x1"]]])
    resolution = float(cells["resolution"].max()) if len(cells) else 1.0
    pad = (span.max() - span.min()) / (2 * resolution) if len(span) else None
    for i, (norm, stage, step) in enumerate(rows):
        for j, g in enumerate(cols):
            ax = axes[i, j]
            sub = cells[(cells["norm"] == norm) & (cells["step"] == step)
                        & (cells["layer_index"] == groups[g])]
            marks.append((ax, ax.scatter(sub["x0"], sub["x1"], marker="s", c="black",
                                         linewidths=0, rasterized=True)))
            pts = data[data["norm"] == norm]
            ax.scatter(pts["x0"], pts["x1"], c=pts["label"], cmap=class_cmap(n_cls), vmin=0,
                       vmax=max(n_cls - 1, 1), s=5, alpha=0.9, linewidths=0.3,
                       edgecolors="white")
            if pad is not None:
                ax.set_xlim(span["x0"].min() - pad["x0"], span["x0"].max() + pad["x0"])
                ax.set_ylim(span["x1"].min() - pad["x1"], span["x1"].max() + pad["x1"])
            ax.set_facecolor("white")
            ax.grid(False)
            which = "all layers" if g == "all" else f"{g} (layer {groups[g]})"
            ax.set_title(f"{which}\n{len(sub)} boundary cells", fontsize=8)
            ax.set_xticks([])
            ax.set_yticks([])
            if j == 0:
                ax.set_ylabel(f"{norm}\n{stage} (step {step})", fontsize=8)
    if not rows:
        for ax in axes.ravel():
            ax.axis("off")
    fig.suptitle(title(df, f"partition boundaries, seed {seed}, {int(resolution)} x "
                           f"{int(resolution)} cells"))
    finish(fig)
    for ax, mark in marks:  # sized once the layout has fixed the panels' sizes
        mark.set_sizes([_marker_area(fig, ax, resolution, float(options.get("dpi", 110)))])
    return fig


def boundaries_measured(config: dict, experiment: str) -> bool:
    """Whether ``experiment`` has boundary rows: where it has density maps
    (:func:`bnstudy.plots.partition_scope.maps_measured`) and ``boundary_resolution`` is not
    0 (its default: :class:`bnstudy.measures.partition.options.Options`)."""
    res = (config.get("partition_density") or {}).get(
        "boundary_resolution", PartitionOptions.boundary_resolution)
    return bool(res) and maps_measured(config, experiment)


register(Family(
    "partition_boundaries", draw, tables=("partition_boundaries",),
    module="partition_boundaries", datasets=("star2d",), in_experiment=boundaries_measured,
    caption=(
        "The spline partition of BN-Explained Fig. 3, drawn as lines: the zero sets of the "
        "hidden units' pre-activations (after the normalizer, before the activation; BN frozen "
        "at the statistics named in the bn_statistics column) of the first, middle and last "
        "hidden layer, and of all layers together (the whole network's partition; columns), "
        "per normalizer at initialization and at the last checkpoint (rows), first seed. A "
        "black mark is a cell of the fine grid (boundary_resolution cells per axis over the "
        "density maps' extent) where some unit of the layer changes sign between neighbouring "
        "grid points; titles count them. Dots are the training points by class. Look for "
        "whether, with BatchNorm, the boundaries gather around the data."),
))
