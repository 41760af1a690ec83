"""The default study's CPU time at fixed seeds per arm: this code against a commit before the
batched trainer (issue 47's study-level target: at least 1.5x lower).

    python benchmarks/bench_study_cpu.py                  # against 8e7a1a8 (per-seed jobs)
    python benchmarks/bench_study_cpu.py --old REV --seeds 12 --keep

Both sides run the same design from scratch, one after the other, each alone with ``--cores 2``:
``config/config.yaml`` as that commit had it and as HEAD has it, each with the replicated
experiments (star, dln, digits) given ``--seeds`` fixed seeds per arm and no replication rounds
(the rounds' decisions may differ between the two codes; a fixed design does not), the lr axis
left out (HEAD moved it to the santurkar study) and the DLN at 600 steps (HEAD's protocol), and
the 2-D maps made for every seed (the old code had no ``map_seeds``). The script then checks that
the two configs differ in nothing but HEAD's own new entries (``training_block``, ``map_seeds``).
The old commit runs in a ``git worktree`` with this interpreter (its package on ``PYTHONPATH``),
HEAD in a fresh clone. It prints each side's wall time, its CPU time (user + system of Snakemake
and every job, from the children's resource usage), each job kind's CPU from the fork server's
log, each measure's time from its logs, and the ratio. Minutes: about 10 and 7 on the 2-core
development VM (2026-12-07).
"""

from __future__ import annotations

import argparse
import copy
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
OLD = "8e7a1a8"  # main before issue 47's batched trainer was applied (14e06af's parent)
REPLICATED = ("star", "dln", "digits")
NEW_ONLY = {"training_block", "bn_jitter.map_seeds", "partition_density.map_seeds"}
MEASURE_LINE = re.compile(r"(\w+) on experiment \S+: \d+ runs in ([0-9.]+)s")


def design(cfg: dict, seeds: int) -> dict:
    """``cfg`` with the fixed design both sides run (the module docstring)."""
    cfg = copy.deepcopy(cfg)  # the caller's config untouched
    cfg["results"] = "results/bench_study_cpu"
    for e in REPLICATED:
        x = cfg["experiments"][e]
        x["seeds"] = list(range(seeds))
        x.pop("replication", None)
    cfg["experiments"].pop("dln_lr", None)
    cfg["trainings"].pop("dln_lr", None)
    cfg["trainings"]["dln_gd"].update(steps=600, eval_every=25)
    for section in cfg.values():
        if isinstance(section, dict) and "map_seeds" in section:
            section["map_seeds"] = "all"
    return cfg


def flat(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        out.update(flat(v, f"{prefix}{k}.") if isinstance(v, dict) else {f"{prefix}{k}": v})
    return out


def run(project: Path, config: Path, src: Path) -> dict:
    """Snakemake from scratch in ``project``: wall, CPU, per-kind and per-measure CPU."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "snakemake", "--cores", "2", "--configfile",
                    str(config)], cwd=project, env=env, check=True, capture_output=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {"wall": wall, "cpu": (after.ru_utime - before.ru_utime)
            + (after.ru_stime - before.ru_stime),
            **tally(project / "results" / "bench_study_cpu")}


def tally(res: Path) -> dict:
    """Each job kind's CPU-s (the fork server's log) and each measure's seconds (its logs)."""
    kinds: dict[str, float] = defaultdict(float)
    for line in (res / "logs" / "forkserver.log").read_text().splitlines():
        m = re.search(r"\d\d:\d\d:\d\d (\S+) \(pid \d+\): exit 0, ([0-9.]+) CPU-s", line)
        if m:
            kinds[m.group(1)] += float(m.group(2))
    measures: dict[str, float] = defaultdict(float)
    for log in (res / "logs").rglob("*.log"):
        for m in MEASURE_LINE.finditer(log.read_text(errors="replace")):
            measures[m.group(1)] += float(m.group(2))
    return {"kinds": dict(kinds), "measures": dict(measures)}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--old", default=OLD, help="the commit to compare with")
    p.add_argument("--seeds", type=int, default=12, help="seeds per arm of star, dln, digits")
    p.add_argument("--keep", action="store_true", help="keep the two project folders")
    a = p.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench_study_cpu_"))
    old, new = tmp / "old", tmp / "new"
    subprocess.run(["git", "worktree", "add", "-q", "--detach", str(old), a.old], cwd=ROOT,
                   check=True)
    subprocess.run(["git", "clone", "-q", str(ROOT), str(new)], check=True)
    try:
        cfgs = {}
        for name, project in (("old", old), ("new", new)):
            cfg = design(yaml.safe_load((project / "config/config.yaml").read_text()), a.seeds)
            cfgs[name] = cfg
            (tmp / f"{name}.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
        fo, fn = flat(cfgs["old"]), flat(cfgs["new"])
        differ = {k for k in set(fo) | set(fn) if fo.get(k) != fn.get(k)}
        if differ - NEW_ONLY:
            sys.exit(f"the two designs differ beyond HEAD's new entries: "
                     f"{sorted(differ - NEW_ONLY)}")
        out = {name: run(project, tmp / f"{name}.yaml", project / "src")
               for name, project in (("old", old), ("new", new))}
    finally:
        if not a.keep:
            subprocess.run(["git", "worktree", "remove", "--force", str(old)], cwd=ROOT)
            shutil.rmtree(tmp, ignore_errors=True)
    print(f"the default study's design, {a.seeds} seeds per arm of {', '.join(REPLICATED)}, "
          f"no rounds, maps for every seed; {a.old} against HEAD, each alone on --cores 2")
    for name in ("old", "new"):
        r = out[name]
        print(f"{name}: wall {r['wall'] / 60:.2f} min, CPU {r['cpu'] / 60:.2f} min; jobs by kind "
              + ", ".join(f"{k} {v:.0f} s" for k, v in sorted(r["kinds"].items()))
              + "; measures " + ", ".join(f"{k} {v:.0f} s" for k, v in
                                          sorted(r["measures"].items())))
    for k in sorted(set(out["old"]["kinds"]) | set(out["new"]["kinds"])):
        o, n = out["old"]["kinds"].get(k, 0.0), out["new"]["kinds"].get(k, 0.0)
        print(f"  {k:18s} {o:7.1f} -> {n:7.1f} CPU-s" + (f"  {o / n:.2f}x" if n else ""))
    print(f"study CPU: old {out['old']['cpu'] / 60:.2f} min, new {out['new']['cpu'] / 60:.2f} min, "
          f"{out['old']['cpu'] / out['new']['cpu']:.2f}x lower (issue 47's target: 1.5x)")


if __name__ == "__main__":
    main()
