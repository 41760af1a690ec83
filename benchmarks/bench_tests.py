"""The README's test command, timed as CI runs it: in a fresh clone of the repository's HEAD, each
step of the command (new venv, installs, ruff, snakefmt, pytest) with its wall time, the CPU time
of every process the command waited for, and what the machine's CPUs are.

    python benchmarks/bench_tests.py                 # a fresh clone of this repository's HEAD
    python benchmarks/bench_tests.py --keep          # keep the clone and the output (kept
                                                     # anyway when the command fails)

The command is read from README.md (the block after "Set up and run the tests:"), so this times
what the README states; `.ci/run` runs the same steps. Issue 33's target: at most 12 minutes on
the 2-core development machine.

The CPU time is the machine's busy time over the command (``/proc/stat``: user, nice, system,
irq and softirq time of every CPU), so it counts every process, the SLURM test cluster's jobs
(children of its daemons, which nothing in the command waits for) and pytest-xdist's workers
(which no one reaps, so ``getrusage`` of the children misses them) included: run it on an
otherwise idle machine. The CPU probe
times a pure-Python loop alone and then on every CPU at once: on a virtual machine whose CPUs
slow each other down when all are busy, the ratio is above 1 and the suite takes longer than
its CPU time alone says.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HEADING = "Set up and run the tests:"
PROBE = ("import time\nt = time.process_time()\ns = 0\n"
         "for i in range(20_000_000):\n    s += i * i\nprint(time.process_time() - t)")


def readme_command(readme: Path) -> str:
    """The README's test command: the first ``bash`` block after :data:`HEADING`."""
    m = re.search(re.escape(HEADING) + r"\s*```bash\n(.+?)\n```", readme.read_text(), re.S)
    if m is None:
        raise SystemExit(f"{readme}: no ```bash block after {HEADING!r}")
    return m.group(1).strip()


def steps(command: str) -> list[str]:
    """The command's steps, in order (it chains them with ``&&``)."""
    return [s.strip() for s in command.split(" && ")]


def timed_script(parts: list[str], marks: str) -> str:
    """A bash script that runs ``parts`` as the command would (stop at the first failure) and
    appends each step's end time to the file ``marks``."""
    lines = ["set -e", f"mark() {{ printf '%s\\n' \"$EPOCHREALTIME\" >> '{marks}'; }}", "mark"]
    for part in parts:
        lines += [part, "mark"]
    return "\n".join(lines) + "\n"


def cpu_model() -> str:
    """The CPU's model name. (Not bnstudy.provenance.cpu_model: importing bnstudy pins the CPU
    kernels in this process's environment, which the timed command would inherit.)"""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def busy_seconds() -> float:
    """CPU seconds the machine's CPUs have been busy since boot (``/proc/stat``'s first line:
    user, nice, system, irq, softirq; not idle, iowait or steal)."""
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()
    user, nice, system, _idle, _iowait, irq, softirq = (int(x) for x in fields[1:8])
    return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")


def probe(n: int) -> list[float]:
    """CPU seconds of the loop in ``n`` processes started together."""
    procs = [subprocess.Popen([sys.executable, "-c", PROBE], stdout=subprocess.PIPE, text=True)
             for _ in range(n)]
    return [float(p.communicate()[0]) for p in procs]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--keep", action="store_true", help="keep the clone")
    args = ap.parse_args()
    cpus = len(os.sched_getaffinity(0))
    alone = probe(1)[0]
    together = probe(cpus)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                            capture_output=True, text=True).stdout.strip()
    print(f"machine: {cpus} CPUs ({cpu_model()}); a CPU-bound loop {alone:.2f} CPU-s alone, "
          f"{max(together):.2f} with all {cpus} busy (ratio {max(together) / alone:.2f})")
    work = Path(tempfile.mkdtemp(prefix="bench_tests-"))
    clone = work / "repo"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    parts = steps(readme_command(clone / "README.md"))  # the clone's: what it runs
    marks = work / "marks"
    script = work / "run.sh"
    script.write_text(timed_script(parts, str(marks)))
    log = work / "log.txt"
    print(f"commit {commit}, in {clone}")
    before = busy_seconds()
    t0 = time.perf_counter()
    with open(log, "w") as out:
        rc = subprocess.run(["bash", str(script)], cwd=clone, stdout=out,
                            stderr=subprocess.STDOUT).returncode
    wall = time.perf_counter() - t0
    cpu = busy_seconds() - before
    ends = [float(x) for x in marks.read_text().split()] if marks.exists() else []
    for i, part in enumerate(parts):
        took = f"{ends[i + 1] - ends[i]:7.1f} s" if i + 1 < len(ends) else "   (not run)"
        print(f"{took}  {part[:90]}")
    summary = [ln for ln in log.read_text().splitlines() if re.search(r"\d+ (passed|failed)", ln)]
    print(f"pytest: {summary[-1].strip('= ') if summary else 'no summary line'}")
    print(f"the command: {wall // 60:.0f} min {wall % 60:.0f} s wall, exit status {rc}; "
          f"the machine's CPUs busy {cpu:.0f} CPU-s ({cpu / wall:.2f} of {cpus} on average)")
    if args.keep or rc != 0:
        print(f"kept: {clone}, the command's output in {log}")
    else:
        shutil.rmtree(work, ignore_errors=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
