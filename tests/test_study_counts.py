"""The README's job counts are generated (bnstudy.planning.counts): a counts block names a study's
config and results directory and is rewritten from the plan, so it cannot go stale."""

from __future__ import annotations

from pathlib import Path

import harness

from bnstudy.config import study
from bnstudy.planning import counts as study_counts
from bnstudy.planning.plan import Plan


def test_a_counts_block_is_rewritten_from_the_plan(tmp_path):
    cfg = harness.tiny_config()
    harness.write_config(tmp_path / "study.yaml", {**cfg, "results": "out"})
    text = ("Before.\n\n<!-- counts: study.yaml out -->\nstale: 3 jobs\n<!-- /counts -->\n"
            "After.\n")
    (tmp_path / "README.md").write_text(text)
    assert study_counts.rewrite_file(tmp_path / "README.md") == 1
    new = (tmp_path / "README.md").read_text()
    plan = Plan({**study.check(study.load([tmp_path / "study.yaml"]), local=False),
                 "results": str(tmp_path / "out")})
    c = plan.job_counts()
    # a train job per arm: the tiny study's experiments have fewer seeds than training_block
    arms = sum(len(x["norms"]) for x in plan.experiments.values())
    assert c["train"] == arms and c["all"] == 1 and c["claims"] == c["report"] == 1
    assert f"`study.yaml`: {sum(c.values())} jobs: " in new and "stale" not in new
    assert f"{arms} train jobs (one per arm and block of seeds)" in new
    assert new.startswith("Before.") and "After." in new
    # idempotent: a second rewrite changes nothing
    study_counts.rewrite_file(tmp_path / "README.md")
    assert (tmp_path / "README.md").read_text() == new


def test_a_study_not_shipped_yet_says_so_instead_of_failing(tmp_path):
    """A replicated study whose results are not there (never run here) has no rounds to count:
    its block says it is not shipped yet; before, reading its missing round files failed."""
    repo = Path(__file__).resolve().parents[1]
    text = (f"<!-- counts: {repo}/config/studies/luo.yaml {tmp_path}/nowhere -->\nold\n"
            "<!-- /counts -->\n")
    out = study_counts.rewrite(text, "/")
    assert "not shipped yet" in out and "old" not in out
