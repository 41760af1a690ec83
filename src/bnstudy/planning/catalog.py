"""What a study config can name: every registry's entries with a one-line description
(``python -m bnstudy list``)."""

from __future__ import annotations

import textwrap
from dataclasses import fields


def registries() -> dict[str, dict[str, str]]:
    """What a config may name, per registry: name -> one-line description."""
    from bnstudy import analyses, data, measures, plots
    from bnstudy.networks import models, normalizers

    plots.load_all()
    return {
        "normalizers": {n: r.description for n, r in sorted(normalizers.REGISTRY.items())},
        "measures": {n: "tables: " + ", ".join(m.tables) + (
            f"; dataset kinds: {', '.join(m.dataset_kinds)}" if m.dataset_kinds else "")
            + "; options: " + ", ".join(f.name for f in fields(m.options))
            for n, m in sorted(measures.REGISTRY.items())},
        "datasets": {k: ", ".join(f"{o}" for o in data.OPTIONS[k]) for k in data.kinds()},
        "architectures": {a: "" for a in models.ARCHS},
        "analyses": {n: "" for n in sorted(analyses.REGISTRY)},
        "figures": {n: textwrap.shorten(f.caption, 100, placeholder=" ...")
                    for n, f in sorted(plots.FAMILIES.items())},
    }
