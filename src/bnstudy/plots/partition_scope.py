"""Which experiments get the partition figures: the scheduling tests (``Family.in_experiment``)
shared by the partition-density figures (:mod:`bnstudy.plots.partition_density`) and the
boundary figure (:mod:`bnstudy.plots.partition_boundaries`), kept apart from both so that
either can use them without importing the other. Torch-free and matplotlib-free: the workflow
calls them when it parses the Snakefile."""

from __future__ import annotations

from bnstudy.networks import archs


def has_partition(config: dict, experiment: str) -> bool:
    """Whether ``experiment``'s network has a partition to draw: a linear network (the DLN)
    has none, its rows say not applicable, and it gets no figure (the section's findings say
    so in one line)."""
    model = config.get("models", {}).get(
        config.get("experiments", {}).get(experiment, {}).get("model"))
    return model is None or not archs.linear(model)


def maps_measured(config: dict, experiment: str) -> bool:
    """Whether the study's ``partition_density`` options give ``experiment`` map rows: only
    ``maps: false`` turns them off (default true, as ``partition_density.Options.maps``; the
    2-D data needed are the family's ``datasets``)."""
    return (bool((config.get("partition_density") or {}).get("maps", True))
            and has_partition(config, experiment))
