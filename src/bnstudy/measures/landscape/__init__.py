"""Loss landscapes as the field draws them (Li et al. 2018) and the Hessian's spectrum beyond its
top eigenvalue (Yao et al. 2020, PyHessian): 1-D and 2-D filter-normalized slices of the
training loss, the line from the initialization to each checkpoint, and Hutchinson's trace,
the top-k eigenvalues (Lanczos) and the eigenvalue density (stochastic Lanczos quadrature).

The measure's contract (torch-free, read by the workflow planner): ``NAME``, ``TABLES`` (the
first is the main table), ``DATASET_KINDS``, ``Options``, ``run``, ``COLUMNS`` / ``ROWS``.
Definitions and every open choice: :mod:`.compute` (slices) and :mod:`.curvature` (spectrum).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

from bnstudy import options

NAME = "landscape"
TABLES = ("landscape", "landscape_grid", "landscape_curvature", "landscape_spectrum",
          "landscape_blocks")
DATASET_KINDS = None
CHECKPOINTS = ("all", "first", "last", "first_last", "none")
BN_STATISTICS = ("batch", "running")
BIAS = ("zero", "weights")
BATCHING = ("vmap", "loop")

__all__ = ["COLUMNS", "ROWS", "DATASET_KINDS", "NAME", "TABLES", "Options", "run"]


@dataclass(frozen=True)
class Options(options.Options):
    """Loss landscapes (Li et al. 2018: filter-normalized 1-D and 2-D slices, the init ->
    checkpoint line) and Hessian trace, top-k eigenvalues and density (PyHessian) on a sample
    of the training set; omit the section to skip the measure."""

    SECTION: ClassVar[str] = "landscape"

    sample_size: int = options.at_least(
        512, 1, doc="training points the loss is averaged over (a seeded subset; capped at "
        "the training set)")
    bn_statistics: str = options.choice(
        "batch", BN_STATISTICS, doc="batch: train mode, the sample is the batch; running: "
        "eval mode with the checkpoint's running averages")
    bias: str = options.choice(
        "zero", BIAS, doc="1-D parameters outside normalizers (biases) in a random direction: "
        "zero (Li et al.'s ignore='biasbn') or a copy of the weights; normalizer parameters "
        "are always zero")
    checkpoints: str = options.choice(
        "first_last", CHECKPOINTS, doc="checkpoints of the 1-D lines and the curvature")
    grid_checkpoints: str = options.choice(
        "last", CHECKPOINTS, doc="checkpoints of the 2-D grid")
    line_range: tuple = (-1.0, 1.0)
    line_points: int = options.at_least(41, 0, doc="points of the random 1-D line (0: off)")
    interpolation_range: tuple = (-0.5, 1.5)
    interpolation_points: int = options.at_least(
        41, 0, doc="points of the line w0 + a (w - w0), init w0 at a = 0 (0: off)")
    grid_range: tuple = (-1.0, 1.0)
    grid_points: int = options.at_least(21, 0, doc="points per axis of the 2-D grid (0: off)")
    batching: str = options.choice(
        "vmap", BATCHING, doc="grid points per forward: vmap (chunk points per pass; one pass "
        "per point where vmap cannot run the model) or loop (one pass per point); "
        "benchmarks/bench_landscape.py times both")
    chunk: int = options.at_least(32, 1, doc="grid points per vmapped forward pass")
    curvature: bool = True
    trace_samples: int = options.at_least(
        32, 2, doc="Rademacher vectors of Hutchinson's trace estimate")
    trace_blocks: bool = options.choice(
        True, (False, True), doc="also each parameter tensor's trace (table landscape_blocks)")
    top_k: int = options.at_least(
        3, 0, doc="top Hessian eigenvalues: the first density run's largest Ritz values")
    lanczos_steps: int = options.at_least(
        40, 2, doc="Lanczos steps of the top-k and of each density run")
    density_runs: int = options.at_least(
        1, 0, doc="stochastic Lanczos quadrature runs (0: no density)")
    hessian_max_params: int = options.at_least(
        1_000_000, 0, doc="larger models get Hutchinson's trace only (Lanczos keeps "
        "lanczos_steps x params float64 numbers)")
    seed: int = options.at_least(0, 0, doc="added to the run's seed for directions, sample "
                                           "and probe vectors")

    def validate(self) -> None:
        for key in ("line_range", "interpolation_range", "grid_range"):
            v = getattr(self, key)
            ok = (len(v) == 2 and all(isinstance(x, (int, float)) and not isinstance(x, bool)
                                      and math.isfinite(x) for x in v) and v[0] < v[1])
            if not ok:
                self.fail(key, "need a pair [min, max] of finite numbers, min < max")
        if self.top_k > self.lanczos_steps:
            self.fail("top_k", f"need at most lanczos_steps ({self.lanczos_steps})")


def run(run: dict, data, options: Options, device) -> dict[str, list[dict]]:
    """The four tables for the checkpoints the options select, of one run file."""
    from bnstudy.measures.landscape import compute

    return compute.run(run, data, Options.parse(options), device)


_IDS = {"step": "the checkpoint's step (0: the initialization)",
        "bn_statistics": "`batch` (train mode, the sample is the batch) or `running` (eval "
                         "mode)",
        "sample_size": ("integer", "training points the loss is averaged over (count)")}
ROWS = {
    "landscape": "one row per run, checkpoint, 1-D line and point on it "
                 "(`bnstudy.measures.landscape.compute`)",
    "landscape_grid": "one row per run, checkpoint and point of the 2-D grid",
    "landscape_curvature": "one row per run and checkpoint: every trainable parameter",
    "landscape_blocks": "one row per run, checkpoint and parameter tensor (`trace_blocks`)",
    "landscape_spectrum": "one row per run, checkpoint and eigenvalue: the top-k (kind `top`) "
                          "and each density run's quadrature nodes (kind `density`)",
}
COLUMNS = {
    "landscape": {
        **_IDS,
        "line": ("string", "`random`: a filter-normalized random direction d, loss at w + a d; "
                           "`interpolation`: loss at w0 + a (w - w0), w0 the initialization"),
        "coord": ("float", "a, the coordinate along the line (1: the step of size ||d||)"),
        "distance": "||a d||_2, distance from the line's origin (w, or w0 for "
                    "`interpolation`), over every trainable parameter",
        "loss": "mean training loss over the sample at the point",
    },
    "landscape_grid": {
        **_IDS,
        "coord_1": ("float", "a, the coordinate along the first filter-normalized direction d1"),
        "coord_2": ("float", "b, the coordinate along the second one, d2"),
        "loss": "mean training loss over the sample at w + a d1 + b d2",
    },
    "landscape_curvature": {
        **_IDS,
        "n_params": "trainable parameters (count)",
        "trace": ("float", "Hutchinson estimate of the Hessian's trace, mean of v'Hv over "
                           "Rademacher v"),
        "trace_se": ("float", "standard error of `trace` (sd / sqrt(samples))"),
        "trace_samples": ("integer", "Rademacher vectors used (count)"),
        "hessian_top": "largest Hessian eigenvalue (the largest Ritz value of Lanczos; NaN "
                       "above hessian_max_params or with top_k 0)",
    },
    "landscape_blocks": {
        **_IDS,
        "block": ("string", "the parameter tensor's name"),
        "n_params": "parameters in the tensor (count)",
        "trace": "Hutchinson estimate of the tensor's diagonal Hessian block's trace (the same "
                 "draws as the total's: the blocks sum to it)",
        "trace_se": "standard error of `trace`",
        "trace_samples": "Rademacher vectors used (count)",
    },
    "landscape_spectrum": {
        **_IDS,
        "kind": ("string", "`top`: the top-k eigenvalues; `density`: one SLQ run's nodes"),
        "run": ("integer", "the density run (0 for `top`)"),
        "rank": ("integer", "position, 1 = largest eigenvalue"),
        "eigenvalue": ("float", "the Ritz value (an eigenvalue estimate of the Hessian)"),
        "weight": ("float", "quadrature weight (squared first component of the Ritz vector; "
                            "sums to 1 per run; NaN for `top`)"),
        "residual": ("float", "|beta_m s_m|, the Ritz pair's eigen-residual bound"),
    },
}
