"""What one Snakemake start costs: the CPU time (user + sys) of ``snakemake -n`` on a copy of the
project, with the keyed cache of config checks, model sizes and the import graph
(:mod:`bnstudy.keyed_cache`) empty (the first start of a study), filled by the start before
(every later one: dry runs, reruns, each cluster job's two starts) and turned off.

    python benchmarks/bench_snakemake_start.py                     # the tiny study
    python benchmarks/bench_snakemake_start.py --configfile config/config.yaml
    python benchmarks/bench_snakemake_start.py --repeats 5

Each figure is the median of ``--repeats`` starts (the empty-cache one: each on a new cache
folder). Also printed: whether the start imported torch (a ``sitecustomize`` on its path records
it).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COPIED = ("Snakefile", "workflow", "config", "src", "profiles", ".test")
HOOK = """
import os, sys
class _Watch:
    def find_spec(self, name, path=None, target=None):
        if name == "torch" and any("snakemake" in a for a in sys.argv):
            open(os.environ["BENCH_TORCH_MARK"], "w").close()
        return None
sys.meta_path.insert(0, _Watch())
"""


def _start(project: Path, configfile: str, cache: str, hook: Path) -> tuple[float, bool]:
    mark = hook / "torch.mark"
    mark.unlink(missing_ok=True)
    env = {**os.environ, "BNSTUDY_CACHE": cache, "BENCH_TORCH_MARK": str(mark),
           "PYTHONPATH": os.pathsep.join([str(hook), str(project / "src")]),
           "OMP_NUM_THREADS": "1"}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-m", "snakemake", "-n", "-q", "--cores", "1",
                    "--configfile", configfile], cwd=project, env=env, check=True,
                   capture_output=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, mark.exists()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--configfile", default=".test/config.yaml")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        project, hook = tmp / "project", tmp / "hook"
        hook.mkdir()
        (hook / "sitecustomize.py").write_text(HOOK)
        for name in COPIED:
            src = ROOT / name
            if src.is_dir():
                shutil.copytree(src, project / name, ignore=shutil.ignore_patterns(
                    "__pycache__", "results", "*.egg-info"))
            elif src.exists():
                project.mkdir(exist_ok=True)
                shutil.copy2(src, project / name)
        _start(project, args.configfile, "off", hook)  # compile the copy's modules once
        rows = {}
        cold = [_start(project, args.configfile, str(tmp / f"cache{i}"), hook)
                for i in range(args.repeats)]
        rows["empty cache (a study's first start)"] = cold
        rows["filled cache (every later start)"] = [
            _start(project, args.configfile, str(tmp / "cache0"), hook)
            for _ in range(args.repeats)]
        rows["cache off (BNSTUDY_CACHE=off)"] = [
            _start(project, args.configfile, "off", hook) for _ in range(args.repeats)]
    print(f"snakemake -n on {args.configfile}, CPU-s per start (median of {args.repeats}):")
    for what, runs in rows.items():
        print(f"  {what:40s} {statistics.median(c for c, _ in runs):5.2f} CPU-s   "
              f"torch imported: {any(t for _, t in runs)}")


if __name__ == "__main__":
    main()
