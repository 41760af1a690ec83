"""The job counts a README states, generated from a study's config and the rounds it took.

A Markdown file holds blocks delimited by::

    <!-- counts: CONFIG RESULTS -->
    ...generated: one sentence...
    <!-- /counts -->

and :func:`rewrite_file` regenerates each from :meth:`bnstudy.planning.plan.Plan.job_counts` of the
study
``CONFIG`` (paths relative to the file) with its replication rounds as ``RESULTS/rounds/``
records them, so the counts cannot go stale (``python -m bnstudy ledger --readme README.md``
rewrites them with the ledgers; ``tests/test_replication_workflow.py`` checks the counts against
the jobs Snakemake runs).
"""

from __future__ import annotations

import re
from pathlib import Path

from bnstudy import measures

BLOCK = re.compile(r"(<!-- counts: (?P<config>\S+) (?P<results>\S+) -->\n)(?P<body>.*?)"
                   r"(?P<end><!-- /counts -->)", re.DOTALL)


def counts(config: str | Path, results: str | Path) -> dict[str, int]:
    """``{rule: jobs}`` of the study ``config`` whose results (and round files) are ``results``."""
    from bnstudy.config import study
    from bnstudy.planning.plan import Plan

    cfg = study.check(study.load([config]), local=False)
    cfg["results"] = str(results)
    return Plan(cfg).job_counts()


def _n(k: int, one: str, many: str | None = None) -> str:
    return f"{k} {one if k == 1 else (many or one + 's')}"


def sentence(c: dict[str, int]) -> str:
    """The counts in words, as the README states them."""
    measure_jobs = sum(v for k, v in c.items() if k in measures.REGISTRY)
    figures = sum(v for k, v in c.items() if k.startswith("plot_"))
    parts = [_n(c.get("prepare_data", 0), "dataset"),
             _n(c.get("train", 0), "train job") + " (one per arm and block of seeds)",
             _n(measure_jobs, "measure job") + " (one per measure and block of seeds)"]
    if c.get("replication_round"):
        parts.append(_n(c["replication_round"], "replication round") + " and their table")
    parts += [_n(c.get("aggregate", 0), "aggregation")]
    if c.get("analysis"):
        parts.append(_n(c["analysis"], "analysis", "analyses"))
    parts += [_n(figures, "figure job"), _n(c.get("job_arguments", 0), "argument file"),
              "the claims ledger and the report"]
    return f"{sum(c.values())} jobs: " + ", ".join(parts) + "."


def rewrite(text: str, root: str | Path = ".") -> str:
    """``text`` with every counts block regenerated."""
    def block(m: re.Match) -> str:
        results = Path(root) / m.group("results")
        try:
            c = counts(Path(root) / m.group("config"), results)
        except ValueError:
            if results.is_dir():
                raise
            # a replicated study not run (shipped) yet: its rounds are not known
            return (m.group(1) + f"`{m.group('config')}`: not shipped yet (no "
                    f"`{m.group('results')}`): its jobs depend on the replication rounds it "
                    "takes; `python -m bnstudy check` prints what its budget buys\n"
                    + m.group("end"))
        return m.group(1) + f"`{m.group('config')}`: " + sentence(c) + "\n" + m.group("end")

    return BLOCK.sub(block, text)


def rewrite_file(path: str | Path) -> int:
    """Regenerate the counts blocks of a Markdown file in place; returns how many there are."""
    path = Path(path)
    text = path.read_text(encoding="utf-8")
    new = rewrite(text, path.parent)
    if new != text:
        path.write_text(new, encoding="utf-8")
    return len(BLOCK.findall(text))
