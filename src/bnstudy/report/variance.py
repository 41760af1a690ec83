"""The report's "more seeds or more probes?" table: where each measure's per-run noise comes from.

For each measure whose per-run values the ledger reads (smoothness, ics, partition density:
:func:`bnstudy.claims.values.variance.split_measure`), one row per experiment and normalizer: how
many of its quantities are dominated by the spread between seeds (``more seeds`` would help) and how
many by the within-run part, and the median share of the within-run part in the variance of a
run's value. The within-run part is lowered by more *replicates* within a run: probes per
checkpoint (smoothness, ICS) or points (partition density), or by more seeds. Checkpoints and
layers are not replicates (each is a different quantity, averaged by design), so the table never
advises more of them: that would change what is measured, not its precision. A user deciding
how to spend compute reads it next to the ledger's ``seeds_needed`` range.
"""

from __future__ import annotations

import pandas as pd

from bnstudy.claims.values import variance

MEASURES = ("smoothness", "ics", "partition_density")
# what lowers a run's within-run part, per measure: replicates inside the run, never checkpoints
# or layers (a fixed factor's levels: bnstudy.claims.values.variance)
OPTION = {"smoothness": "probes per checkpoint (smoothness.n_probes), or seeds; not more "
                        "checkpoints (they change the quantity)",
          "ics": "probe batch per checkpoint and layer (ics.probe_size), or seeds; not more "
                 "checkpoints or layers (they change the quantity)",
          "partition_density": "points (partition_density.n_points)"}


def table(frames: dict[str, pd.DataFrame]) -> str:
    """The HTML table, or '' when the study has none of the measures' tables."""
    df = rows(frames)
    return "" if df.empty else df.to_html(index=False, border=0)


def rows(frames: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """One row per measure, experiment and normalizer (see the module docstring)."""
    out = []
    for m in MEASURES:
        df = frames.get(m)
        if df is None or df.empty:
            continue
        try:
            split = variance.split_measure(m, df)
        except ValueError:
            continue  # a table without the columns the split needs (an old results directory)
        split = split[split["n_runs"] >= 2]
        for (e, norm), g in split.groupby(["experiment", "norm"], sort=True):
            seeds = int((g["advice"] == "more seeds").sum())
            out.append({"measure": m, "experiment": e, "normalizer": norm,
                         "quantities": len(g), "more seeds": seeds,
                         "more within-run samples": len(g) - seeds,
                         "median within-run share": f"{g['within_share'].median():.0%}",
                         "lower the within-run part with": OPTION[m]})
    return pd.DataFrame(out)
