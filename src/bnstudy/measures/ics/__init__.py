"""Internal covariate shift (Santurkar et al. 2018, Def. 2.1 and Fig. 8).

The measure's contract (torch-free, read by the workflow planner): ``NAME`` (its config section),
``TABLES`` (the first is the main table), ``DATASET_KINDS`` (``None``: every kind), ``Options``,
``run``, ``COLUMNS`` / ``ROWS`` (what its tables' columns and rows mean: :mod:`.columns`) and
``check`` (its ``layers`` against the model's layers, before any job runs).
The definitions and every open choice are documented in :mod:`.compute` (the ``ics`` table) and
:mod:`.activations` (``ics_activations``: quantiles of sampled units' normalizer outputs over
training, Santurkar's Figs. 2 and 6).
"""

from __future__ import annotations

from bnstudy.measures.ics.columns import COLUMNS, ROWS
from bnstudy.measures.ics.options import Options

NAME = "ics"
TABLES = ("ics", "ics_activations")
DATASET_KINDS = None

__all__ = ["COLUMNS", "ROWS", "DATASET_KINDS", "NAME", "TABLES", "Options", "check", "run"]


def run(run: dict, data, options: Options, device) -> dict[str, list[dict]]:
    """Rows of ics and ics_activations for every checkpoint of one run file
    (:mod:`bnstudy.train.checkpoints`) on its dataset."""
    from bnstudy.measures.ics import activations, compute

    opts = Options.parse(options)
    return {"ics": compute.run_ics(run, data, opts, device),
            "ics_activations": activations.run_activations(run, data, opts, device)}


def check(options: Options, model) -> None:
    """Refuse ``layers`` indices that ``model`` (the experiment's plain net) does not have, at
    config-check time rather than inside a measure job after training."""
    from bnstudy.measures.ics import compute

    opts = Options.parse(options)
    n_layers = len(compute.layer_groups(model))
    try:
        compute.resolve_layers(opts.layers, n_layers)
    except ValueError as e:
        opts.fail("layers", str(e))
