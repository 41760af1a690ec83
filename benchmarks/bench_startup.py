"""Start-up cost of the workflow's jobs: how many jobs a study has, what each kind pays before it
does any work (interpreter, libraries, the package), and that cost's share of the study's CPU.

    python benchmarks/bench_startup.py                       # the default study, dry run only
    python benchmarks/bench_startup.py --configfile config/studies/luo.yaml
    python benchmarks/bench_startup.py --run                 # also run it from scratch (minutes)

Start-up per job kind is the CPU time (user + sys) of a fresh ``python -c`` that imports what
that kind's command imports before its first computation (and, for training, builds its
optimizer), the median of ``--repeats`` runs. The dry run counts the first replication round's
jobs only (later rounds are planned when the round before ends).
A local Snakemake run starts its ``python -m bnstudy`` jobs from the fork server
(:mod:`bnstudy.forkserver`), which has imported everything once: the script also prints what a
job's start costs then (the wall time of a served ``python -m bnstudy --help``: the job's own
interpreter, connecting, forking, the child's reply). With ``--run`` the study runs from scratch
into a temporary results directory (``--no-forkserver``: every job in its own process) and the
script prints its wall time, its total CPU (every job's and the server's, from the children's
resource usage) and, without the server, the start-up share = sum over jobs of their kind's
start-up / total CPU.
"""

from __future__ import annotations

import argparse
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# What each job kind imports before computing (mirrors the CLI verbs' imports).
KINDS = {
    "prepare_data": "import bnstudy.cli.main, bnstudy.data, bnstudy.io",
    # the optimizer too: torch.optim's first step imports torch._dynamo (bench_sgd.py)
    "train": "import bnstudy.cli.main, torch, bnstudy.data, bnstudy.io, bnstudy.train.loop as t, "
             "bnstudy.train.checkpoints; t.make_optimizer(torch.nn.Linear(2, 2), "
             "t.TrainConfig.from_dict({'lr': 0.1, 'steps': 1}))",
    "measure": "import bnstudy.cli.main, torch, bnstudy.data, bnstudy.io, bnstudy.measures, "
               "bnstudy.train.checkpoints, bnstudy.train.loop, pandas",
    "aggregate": "import bnstudy.cli.main, bnstudy.tables.aggregation",
    "analysis": "import bnstudy.cli.main, bnstudy.analyses, bnstudy.io, pandas",
    "plot": "import bnstudy.cli.main, bnstudy.plots; bnstudy.plots.load_all(); "
            "import matplotlib.pyplot, seaborn",
    "claims": "import bnstudy.cli.main, bnstudy.io, bnstudy.claims.ledger, scipy.stats",
    # a replication round computes the study's ledger as it stands (claims' imports)
    "replication_round": "import bnstudy.cli.main, bnstudy.replication.rounds, scipy.stats",
    "replication_table": "import bnstudy.cli.main, bnstudy.replication.rounds, "
                         "bnstudy.tables.aggregation",
    # a script job: a plain Python process (Snakemake's script preamble, then the script)
    "job_arguments": "import snakemake.script, bnstudy.planning.arguments",
    "report": "import bnstudy.cli.main, bnstudy.report.build; import bnstudy.plots; "
              "bnstudy.plots.load_all()",
}


def kind_of(rule: str, measures: set[str]) -> str | None:
    if rule in measures:
        return "measure"
    if rule.startswith("plot_"):
        return "plot"
    return rule if rule in KINDS else None


def startup_cpu(code: str, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        times.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return statistics.median(times)


def served_startup(repeats: int) -> float:
    """Median wall seconds of a ``python -m bnstudy --help`` job that the fork server runs."""
    import os

    from bnstudy import forkserver

    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "forkserver.log"
        forkserver.start(True, str(log))
        try:
            while "ready" not in (log.read_text() if log.exists() else ""):
                time.sleep(0.05)
            times = []
            for _ in range(repeats):
                t0 = time.perf_counter()
                subprocess.run([sys.executable, "-m", "bnstudy", "--help"], check=True, cwd=ROOT,
                               env=os.environ, stdout=subprocess.DEVNULL)
                times.append(time.perf_counter() - t0)
            served = log.read_text().count(") started")
        finally:
            forkserver.stop()
    if served < repeats:
        raise SystemExit(f"the fork server ran {served} of {repeats} jobs: see {log}")
    return statistics.median(times)


def planned_jobs(args: list[str]) -> dict[str, int]:
    out = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--forceall", *args],
                         cwd=ROOT, capture_output=True, text=True, check=True).stdout
    stats = out.split("Job stats:", 1)[1]
    jobs = {}
    for line in stats.splitlines()[3:]:
        m = re.match(r"^(\w+)\s+(\d+)\s*$", line)
        if not m:
            break
        if m.group(1) not in ("total", "all"):
            jobs[m.group(1)] = int(m.group(2))
    return jobs


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--configfile", help="a study file (default: config/config.yaml)")
    p.add_argument("--cores", type=int, default=2)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--run", action="store_true", help="run the study from scratch as well")
    p.add_argument("--no-forkserver", action="store_true",
                   help="with --run: every job in its own process (BNSTUDY_FORKSERVER=0)")
    a = p.parse_args()
    from bnstudy import measures

    cfg = ["--configfile", a.configfile] if a.configfile else []
    jobs = planned_jobs(cfg)
    per_kind: dict[str, int] = {}
    for rule, n in jobs.items():
        k = kind_of(rule, set(measures.REGISTRY))
        if k is None:
            raise SystemExit(f"unknown rule {rule!r}: add its kind to KINDS")
        per_kind[k] = per_kind.get(k, 0) + n
    cost = {k: startup_cpu(KINDS[k], a.repeats) for k in per_kind}
    total_jobs = sum(per_kind.values())
    startup = sum(per_kind[k] * cost[k] for k in per_kind)
    print(f"study: {a.configfile or 'config/config.yaml'}: {total_jobs} jobs")
    print(f"{'kind':<14}{'jobs':>6}{'start-up CPU s/job':>20}{'total s':>10}")
    for k in sorted(per_kind, key=lambda k: -per_kind[k] * cost[k]):
        print(f"{k:<14}{per_kind[k]:>6}{cost[k]:>20.2f}{per_kind[k] * cost[k]:>10.1f}")
    print(f"start-up CPU, all jobs: {startup:.0f} s ({startup / total_jobs:.2f} s per job)")
    served = served_startup(a.repeats)
    print(f"a job the fork server runs starts in {served:.2f} s wall (the `python -m bnstudy` "
          f"jobs of a local run; {jobs.get('job_arguments', 0)} script jobs do not use it)")
    if not a.run:
        return
    import os

    env = {**os.environ, "BNSTUDY_FORKSERVER": "0" if a.no_forkserver else "1"}
    with tempfile.TemporaryDirectory() as tmp:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "snakemake", "--cores", str(a.cores), "-q",
                        *cfg, "--config", f"results={tmp}/results"], cwd=ROOT, check=True,
                       env=env)
        wall = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    share = "" if not a.no_forkserver else \
        f"; start-up share {100 * startup / cpu:.0f}% of the CPU"
    print(f"study from scratch on {a.cores} cores "
          f"({'without' if a.no_forkserver else 'with'} the fork server): {wall / 60:.1f} min "
          f"wall, {cpu / 60:.1f} CPU-min{share}")


if __name__ == "__main__":
    main()
