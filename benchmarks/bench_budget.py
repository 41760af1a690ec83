"""The calibration of a replication budget's CPU-minutes (bnstudy.planning.budget.CALIBRATION).

Prints the cost model's CPU-minutes (uncalibrated) of the training and measure jobs a study
ran, its round files read from ROUNDS (default: the shipped default study's), beside the
calibrated per-seed cost of each replicated experiment. Compare the first figure with the
study's measured CPU time (benchmarks/README.md, "The default study this round").

    python benchmarks/bench_budget.py [--config FILE] [--rounds studies/default/rounds]
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile

from bnstudy.config import study
from bnstudy.planning import budget
from bnstudy.planning.plan import Plan


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default="config/config.yaml")
    ap.add_argument("--rounds", default="studies/default/rounds")
    a = ap.parse_args()
    cfg = study.check(study.load([a.config]))
    with tempfile.TemporaryDirectory() as d:
        shutil.copytree(a.rounds, os.path.join(d, "rounds"))
        cfg["results"] = d
        plan = Plan(cfg)
        print(f"looks taken: {plan.looks()}")
        print(f"cost model, training and measure jobs taken: "
              f"{budget.taken_minutes(plan):.1f} CPU-min (uncalibrated)")
        print(f"calibration: {budget.CALIBRATION:.3f}")
        for e in plan.policies:
            print(f"  {e}: one seed of every arm ~{plan.seed_minutes(e):.2f} CPU-min")


if __name__ == "__main__":
    main()
