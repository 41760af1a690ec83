"""Run files bound to their place: a file under ``runs/`` says, inside its checksum, which run
or which block of seeds it belongs to, and every reader compares that with where it lies.

The layout (:mod:`bnstudy.tables.layout`) puts a run's files at
``runs/<experiment>/<norm>/seed<seed>/<name>`` and a measure's table over a block of an
experiment's seeds at ``runs/<experiment>/seeds<label>/<name>``. A checksum proves that a file
is intact, not that it is in the right place: another run's ``history.parquet`` copied over this
one's passes it, and was aggregated as this run (one seed counted twice, another gone). So each
file carries its place (:func:`run_place`, :func:`block_place`) where its checksum covers it:

- ``history.parquet``: its provenance's ``config``, the run spec (experiment, norm, seed);
- ``checkpoints.pt``: its ``spec``;
- a measure's block table: its provenance's ``place`` (the experiment and the block's seeds);
- the resume state and its checkpoint files: their ``place``, the place they were written to.

:func:`check` raises :class:`bnstudy.io.MisplacedFile` (a :class:`bnstudy.io.CorruptFile`)
naming the file, what it says it is and where it lies; the aggregate, ``verify``, the measure
jobs, the trainer's resume and :func:`bnstudy.results.load` all call it. A file outside the
layout (a table under ``tables/``, a dataset) has no place to check.
"""

from __future__ import annotations

import re
from pathlib import Path

from bnstudy import io
from bnstudy.tables.layout import label_seeds, seeds_label

KEY = "place"  # a table's provenance key, a run file's entry
RUNS = "runs"
_RUN_DIR = re.compile(r"seed([0-9]+)")
_BLOCK_DIR = re.compile(r"seeds([0-9][0-9_-]*)")


def run_place(experiment, norm, seed) -> dict:
    """The place of one run's files."""
    return {"experiment": str(experiment), "norm": str(norm), "seed": int(seed)}


def block_place(experiment, seeds) -> dict:
    """The place of a measure's table over one block of an experiment's seeds."""
    return {"experiment": str(experiment), "seeds": sorted(int(s) for s in seeds)}


def place_of(path: str | Path) -> dict | None:
    """Where ``path`` lies in the layout: a run's place, a block's place, or None (not a run
    or block file)."""
    parts = Path(path).parts
    if len(parts) >= 5 and parts[-5] == RUNS and (m := _RUN_DIR.fullmatch(parts[-2])):
        return run_place(parts[-4], parts[-3], int(m[1]))
    if len(parts) >= 4 and parts[-4] == RUNS and (m := _BLOCK_DIR.fullmatch(parts[-2])):
        try:
            return block_place(parts[-3], label_seeds(m[1]))
        except ValueError:
            return None
    return None


def _normal(place) -> dict | None:
    """``place`` as :func:`run_place` or :func:`block_place` writes it; None if it is neither."""
    if not isinstance(place, dict):
        return None
    try:
        if set(place) == {"experiment", "norm", "seed"} and not isinstance(place["seed"], bool):
            return run_place(place["experiment"], place["norm"], place["seed"])
        if set(place) == {"experiment", "seeds"} and isinstance(place["seeds"], list):
            return block_place(place["experiment"], place["seeds"])
    except (TypeError, ValueError):
        return None
    return None


def _of_spec(spec) -> dict | None:
    ids = getattr(spec, "ids", None)  # a parsed RunSpec, or its JSON form
    d = ids if isinstance(ids, dict) else spec
    if isinstance(d, dict) and {"experiment", "norm", "seed"} <= set(d):
        return _normal({k: d[k] for k in ("experiment", "norm", "seed")})
    return None


def claimed_by_table(prov: dict) -> dict | None:
    """The place a table's provenance says it belongs to (None: it says none)."""
    if not isinstance(prov, dict):
        return None
    if KEY in prov:
        return _normal(prov[KEY])
    return _of_spec(prov.get("config"))  # a run's history: its run spec


def claimed_by_run_file(blob) -> dict | None:
    """The place a ``.pt`` run file's content says it belongs to (None: it says none)."""
    if not isinstance(blob, dict):
        return None
    if KEY in blob:
        return _normal(blob[KEY])
    return _of_spec(blob.get("spec"))  # checkpoints.pt: its run spec


def describe(place: dict) -> str:
    """A place as a reader names it: ``run e/norm/seed0`` or ``block e/seeds0-2``."""
    if "norm" in place:
        return f"run {place['experiment']}/{place['norm']}/seed{place['seed']}"
    return f"block {place['experiment']}/seeds{seeds_label(place['seeds'])}"


def check(path: str | Path, claimed: dict | None) -> None:
    """Nothing when ``path`` lies outside the layout or where ``claimed`` (what the file says it
    is) belongs; else :class:`bnstudy.io.MisplacedFile` naming the file, what it says it is and
    where it lies."""
    where = place_of(path)
    if where is None:
        return
    if claimed is None:
        raise io.MisplacedFile(
            f"{path} does not say which run it belongs to (no experiment, normalizer and seed "
            f"in its checksummed metadata: written by an older bnstudy, or not a run file), so "
            f"it cannot be trusted as {describe(where)}'s; {io.REDO}")
    if claimed != where:
        raise io.MisplacedFile(
            f"{path} says it is {describe(claimed)}'s file but lies in {describe(where)}'s "
            f"place: it was copied or moved there from another run and will not be read as "
            f"{describe(where)}'s; {io.REDO}")


def check_outputs(outs, place: dict) -> None:
    """A ValueError, before any work, when a job would write a file saying ``place`` into
    another run's or block's place."""
    for out in outs:
        where = place_of(out)
        if where is not None and where != place:
            raise ValueError(f"{out} is {describe(where)}'s place, but this job writes "
                             f"{describe(place)}'s file: give it a path under its own place "
                             f"(bnstudy.tables.layout)")


def read_table(path: str | Path):
    """A run's or block's table and its provenance, checksum verified (:func:`bnstudy.io.
    read_table`) and its place checked (:func:`check`)."""
    df, prov = io.read_table(path), io.read_provenance(path)
    check(path, claimed_by_table(prov))
    return df, prov


def load_pt(path: str | Path, kind: str | None):
    """A ``.pt`` run file's content, checksum verified (:func:`bnstudy.io.load_pt`) and its
    place checked (:func:`check`)."""
    blob = io.load_pt(path, kind)
    check(path, claimed_by_run_file(blob))
    return blob
