"""Shipping a finished study's results into the repository: its ledger, rounds, report and
aggregated tables, not its runs.

``results/`` is not tracked (runs, checkpoints and per-run tables are large and machine-made),
so the README's ledgers and counts would not regenerate, nor the reports open, in a fresh
clone. :func:`ship` copies what a reader needs from a study's results directory into a tracked
folder (``studies/<name>/``), keeping the results layout, so that every reader of results
directories (``python -m bnstudy ledger``, ``compare``, the README's ``<!-- ledger: DIR -->``
and ``<!-- counts: CONFIG DIR -->`` blocks) reads the folder as it reads the results:

- ``tables/claims.parquet`` (the ledger, checksummed; verified before it is copied) and
  ``tables/replication.parquet`` when the study ran rounds;
- ``rounds/round<k>.json`` (the rounds' records, which the job counts need);
- ``report.html`` and ``report_tables/*.csv`` (the ledger and the summaries over seeds);
- every other aggregated table under ``tables/`` (the per-checkpoint rows the figures are drawn
  from, not the runs' checkpoints), each verified and rewritten with zstd compression (level 19,
  same rows, columns and provenance), so that ``bnstudy.results.load("studies/<name>")`` lists
  the measure tables and :meth:`bnstudy.results.Results.plot` redraws every figure of the report
  without rerunning the study.

Each file is copied to a temporary name and renamed, so an interrupted ship leaves the old
files; files of an earlier ship that the study no longer has are removed.
"""

from __future__ import annotations

import shutil
from pathlib import Path

PATTERNS = ("tables/claims.parquet", "tables/replication.parquet", "rounds/round*.json",
            "report.html", "report_tables/*.csv", "tables/*.parquet")
COPIED = ("tables/claims.parquet", "tables/replication.parquet")  # byte for byte; other tables
# are recompressed (zstd)


def files(results: str | Path) -> list[Path]:
    """The shippable files of a results directory, relative to it, in a stable order."""
    root = Path(results)
    return sorted({p.relative_to(root) for pat in PATTERNS for p in root.glob(pat)
                   if p.is_file()})


def size_mb(folder: str | Path) -> float:
    """The size of a shipped folder's files, in MB (10^6 bytes)."""
    return sum(p.stat().st_size for p in Path(folder).rglob("*") if p.is_file()) / 1e6


def ship(results: str | Path, dest: str | Path) -> list[Path]:
    """Copy :func:`files` of ``results`` into ``dest`` (created); returns the copied paths.
    Refuses a results directory whose ledger is missing or fails its checksum."""
    from bnstudy import io

    src, out = Path(results), Path(dest)
    ledger = src / "tables" / "claims.parquet"
    if not ledger.is_file():
        raise FileNotFoundError(f"no claims ledger at {ledger}: run that study first")
    io.read_table(ledger)  # a foreign or corrupt ledger stops here, naming it
    wanted = files(src)
    for rel in wanted:
        target = out / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.tmp")
        if rel.parent.name == "tables" and rel.as_posix() not in COPIED:
            prov = io.read_provenance(src / rel)  # a corrupt table stops here, naming it
            io.write_table(io.read_table(src / rel), tmp, prov, compression="zstd")
        else:
            shutil.copyfile(src / rel, tmp)
        tmp.replace(target)
    if out.is_dir():
        for old in files(out):
            if old not in wanted:
                (out / old).unlink()
    return [out / rel for rel in wanted]
