"""``python -m bnstudy verify [RESULTS]``: every checksummed file of a study, checked.

Snakemake reruns a job when its inputs are newer than its outputs; a byte changed on disk
(a failing disk, a bad copy) keeps the file's mtime and is never seen ("Nothing to be done")
until a job reads it. :func:`check_study` reads every file that carries a checksum (the tables
``*.parquet``, the run and resume files ``*.pt``, the datasets ``*.npz``; see :mod:`bnstudy.io`)
and :func:`report` names the bad ones and the command that writes them again. A run's file
(``runs/<experiment>/<norm>/seed<seed>/...``) or a block's table (``runs/<experiment>/
seeds<label>/...``) must also say it is that run's or block's (:mod:`bnstudy.tables.binding`):
an intact file copied over another run's is bad too.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

SUFFIXES = (".parquet", ".pt", ".npz")
RESUME = "resume.pt"  # the trainer's resume state: not a workflow output


def _resume_file(path) -> bool:
    """The resume state or one of its checkpoint files (``resume.ckpt<step>.pt``)."""
    return path.name == RESUME or re.fullmatch(r"resume\.ckpt[0-9]+\.pt", path.name) is not None


@dataclass
class Verdict:
    root: Path
    good: list[Path] = field(default_factory=list)
    bad: list[tuple[Path, str]] = field(default_factory=list)  # (file, what is wrong)


def files(root: str | Path) -> list[Path]:
    """The checksummed files under ``root`` (not the writers' temporaries ``.<name>.tmp<pid>``)."""
    return sorted(p for p in Path(root).rglob("*") if p.suffix in SUFFIXES and p.is_file()
                  and not p.name.startswith("."))


def check_file(path: Path) -> str | None:
    """None when ``path`` reads back with its checksum verified (and, for a run's or a block's
    file, its place: :mod:`bnstudy.tables.binding`), else what is wrong."""
    from bnstudy import data, io
    from bnstudy.tables import binding

    try:
        if path.suffix == ".parquet":
            binding.read_table(path)
        elif path.suffix == ".pt":
            binding.load_pt(path, None)
        else:
            data.load(path)
    except (io.CorruptFile, OSError) as e:
        return str(e).split("; delete it and rerun")[0]
    return None


def check_study(root: str | Path) -> Verdict:
    """Every checksummed file of the results directory ``root``, checked."""
    root = Path(root)
    if not root.is_dir():
        raise FileNotFoundError(f"results directory {str(root)!r} does not exist or is not a "
                                "directory (give the study's `results:` directory)")
    verdict = Verdict(root)
    for path in files(root):
        problem = check_file(path)
        if problem is None:
            verdict.good.append(path)
        else:
            verdict.bad.append((path, problem))
    return verdict


def report(verdict: Verdict) -> str:
    """The verdict as text: counts, each bad file and what is wrong, and what to rerun."""
    n = len(verdict.good) + len(verdict.bad)
    lines = [f"{verdict.root}: {n} checksummed files (tables, run files, datasets), "
             f"{len(verdict.good)} good, {len(verdict.bad)} bad"]
    if not n:
        lines.append("  nothing to check: no .parquet, .pt or .npz file here")
    for path, problem in verdict.bad:
        lines.append(f"  BAD {path}: {problem}")
    outputs = shlex.join(str(p) for p, _ in verdict.bad if not _resume_file(p))
    resumes = shlex.join(str(p) for p, _ in verdict.bad if _resume_file(p))
    if outputs:
        lines.append("To write them again (their jobs and everything downstream), from the "
                     "study's working directory, with the study's --configfile if it has one:\n"
                     f"  snakemake --cores 1 --forcerun {outputs}\n"
                     f"or delete them (rm {outputs}) and rerun the study.")
    if resumes:
        lines.append("A bad resume state is discarded by its train job, which then starts that "
                     f"run afresh; or delete it: rm {resumes}")
    return "\n".join(lines)
