"""The config's ``resources:`` section: per-rule cluster requests a study may override.

It may name only rules of the workflow (:func:`rules`) and give each only the requests in
:data:`KEYS` as integers; :mod:`bnstudy.planning.resources` estimates the rest.
"""

from __future__ import annotations

from bnstudy.config.loader import fail

KEYS = ("gpu", "mem_mb", "runtime")
FIXED_RULES = ("prepare_data", "train", "aggregate", "analysis", "claims", "report",
               "replication_round", "replication_table")


def rules() -> list[str]:
    """Every rule a study's ``resources:`` may name: the fixed ones, every registered measure
    and every figure family's ``plot_<family>``."""
    from bnstudy import measures, plots

    plots.load_all()
    return [*FIXED_RULES, *measures.REGISTRY, *(f"plot_{f}" for f in plots.FAMILIES)]


def check(cfg: dict, names=None) -> None:
    """The ``resources:`` section names only rules of the workflow (``names``, default
    :func:`rules`) and gives each only ``gpu`` (>= 0), ``mem_mb`` and ``runtime`` (>= 1) as
    integers."""
    section = cfg.get("resources") or {}
    if not section:
        return
    names = rules() if names is None else names
    for name, entry in section.items():
        where = f"resources.{name}"
        if name not in names:
            fail(where, f"{name!r} is not a rule of the workflow; allowed: {sorted(names)}")
        if not isinstance(entry, dict) or not entry:
            fail(where, f"got {entry!r}; allowed: a mapping of some of {list(KEYS)}")
        for key, value in entry.items():
            low = 0 if key == "gpu" else 1
            if key not in KEYS:
                fail(f"{where}.{key}", f"unknown resource; allowed: {list(KEYS)}")
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                fail(f"{where}.{key}", f"got {value!r}; allowed: an integer >= {low}")
