"""A job does not outlive the Snakemake that started it; one writer per run (issue 50, item 3).

After SIGKILL of Snakemake, its two training jobs went on for about two minutes, and a new run
(after ``--unlock``) trained the same runs beside them. A stand-in for Snakemake here does what
the Snakefile's ``onstart`` does (:func:`bnstudy.jobs.lifeline.export`, and the fork server when
asked) and starts a long ``python -m bnstudy train`` through a shell, as Snakemake's jobs are
started; it is then SIGKILLed, and the job must end within seconds, in its own process and as a
fork server's child alike. A second writer of a run directory is refused, naming the first.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from specs import make_spec

from bnstudy import data
from bnstudy.cli import main as cli
from bnstudy.jobs import lifeline, run_writer

LONG = make_spec(training={"lr": 0.01, "batch_size": 16, "steps": 10**7, "eval_every": 10**6,
                           "checkpoints": [0]})
SNAKEMAKE = textwrap.dedent("""
    import os, re, subprocess, sys, time
    from bnstudy import forkserver
    from bnstudy.jobs import lifeline
    mode, work, job = sys.argv[1:]
    lifeline.export(True)  # as the Snakefile's onstart
    if mode == "forkserver":
        log = os.path.join(work, "forkserver.log")
        forkserver.start(True, log)
        while not re.search(r"ready \\(pid \\d+\\)", open(log).read() if os.path.exists(log)
                            else ""):
            time.sleep(0.05)
    else:
        os.environ.pop(forkserver.ADDRESS, None)
    p = subprocess.Popen(["/bin/bash", "-c", "set -euo pipefail; " + job])  # as Snakemake's shell
    print(p.pid, flush=True)
    time.sleep(600)
""")


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rpartition(")")[2].split()[0] in ("Z", "X")
    except FileNotFoundError:
        return True


def _children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as fh:
            return [int(x) for x in fh.read().split()]
    except FileNotFoundError:
        return []


def _wait(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = predicate()
        if got:
            return got
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


@pytest.mark.parametrize("mode", ["own_process", "forkserver"])
def test_a_killed_snakemakes_job_stops_within_seconds(tmp_path, star, mode):
    data.save(star, tmp_path / "star.npz")
    out = tmp_path / "runs" / "t" / "batchnorm" / "seed0"
    log = tmp_path / "train.log"
    job = " ".join(shlex.quote(a) for a in [
        sys.executable, "-m", "bnstudy", "train", "--data", str(tmp_path / "star.npz"),
        "--spec", json.dumps(LONG), "--device", "cpu", "--resume", str(out / "resume.pt"),
        "--out-checkpoints", str(out / "checkpoints.pt"),
        "--out-history", str(out / "history.parquet")]) + f" > {shlex.quote(str(log))} 2>&1"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env.pop(lifeline.ENV, None)
    fake = subprocess.Popen([sys.executable, "-c", SNAKEMAKE, mode, str(tmp_path), job],
                            stdout=subprocess.PIPE, text=True, env=env)
    served, jobs = None, []
    try:
        shell = int(fake.stdout.readline())
        # the job is training: it holds its run's writer lock
        _wait(lambda: (out / run_writer.WRITER_FILE).exists(), 120, "the job to start training")
        if mode == "forkserver":
            text = (tmp_path / "forkserver.log").read_text()
            served = int(re.search(r"train \(pid (\d+)\) started", text).group(1))
        jobs = [shell, *_children(shell)]
        fake.send_signal(signal.SIGKILL)
        fake.wait()
        t0 = time.monotonic()
        _wait(lambda: all(_gone(p) for p in [*jobs, *([served] if served else [])]), 15,
              f"the job {jobs} (served by {served}) to stop")
        took = time.monotonic() - t0
    finally:
        if fake.poll() is None:
            fake.kill()
        for pid in [*jobs, *([served] if served else [])]:  # only a failed test leaves one
            if not _gone(pid):
                os.kill(pid, signal.SIGKILL)
    assert took < 10
    assert "the Snakemake that started this job" in log.read_text()
    assert not (out / "checkpoints.pt").exists()  # nothing half-written is left as an output


def test_a_job_run_by_hand_or_on_another_host_watches_nothing(monkeypatch):
    monkeypatch.delenv(lifeline.ENV, raising=False)
    assert lifeline.watch() is None
    monkeypatch.setenv(lifeline.ENV, f"another-host {os.getppid()} 1")
    assert lifeline.watch() is None
    lifeline.export(False)
    assert lifeline.ENV not in os.environ


def test_a_reused_pid_is_not_its_snakemake():
    me = os.getpid()
    started = lifeline.start_time(me)
    assert lifeline.alive(me, started)
    assert not lifeline.alive(me, str(int(started) + 1))


def test_a_second_writer_of_a_run_is_refused_naming_the_first(tmp_path, star, capsys):
    run = tmp_path / "run"
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import sys, time
        from bnstudy.jobs import run_writer
        with run_writer.one_writer({str(run)!r}, "train t/batchnorm/seed0"):
            print("held", flush=True)
            time.sleep(60)
    """)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(run_writer.RunBusy) as e:
            with run_writer.one_writer(run):
                pass
        msg = str(e.value)
        assert f"pid {holder.pid}" in msg and "train t/batchnorm/seed0" in msg
        assert msg.startswith(str(run)) and "\n" not in msg
        data.save(star, tmp_path / "star.npz")
        argv = ["train", "--data", str(tmp_path / "star.npz"), "--spec", json.dumps(make_spec()),
                "--device", "cpu", "--out-checkpoints", str(run / "checkpoints.pt"),
                "--out-history", str(run / "history.parquet")]
        assert cli.main(argv) == 2
        err = capsys.readouterr().err
        assert f"pid {holder.pid}" in err and not (run / "history.parquet").exists()
    finally:
        holder.kill()
        holder.wait()
    assert cli.main(argv) == 0  # the lock ends with its process
    assert sorted(p.name for p in Path(run).iterdir()) == ["checkpoints.pt", "history.parquet"]


def test_measures_write_a_block_side_by_side_but_one_measure_once(tmp_path):
    block = tmp_path / "seeds0-1"
    with run_writer.one_writer(block, "measure a", files="a"):
        with run_writer.one_writer(block, "measure b", files="b"):  # another measure: allowed
            pass
        with pytest.raises(run_writer.RunBusy, match="measure a"):
            with run_writer.one_writer(block, files="a"):
                pass
    assert not block.exists()  # no lock file left behind, nor the folder they made to hold it


@pytest.mark.workflow
def test_a_killed_real_snakemakes_train_job_stops(tmp_path_factory):
    """The Snakefile's onstart exports the lifeline: a real Snakemake, SIGKILLed while its train
    job runs, leaves no training behind (fork server off, so the job is Snakemake's shell's own
    python; the served case is the stand-in test's)."""
    import harness

    project = harness.copy_project(tmp_path_factory.mktemp("lifeline") / "project")
    cfg = harness.with_steps(harness.only_experiments(harness.tiny_config(), "star"), 10**6)
    cfg["trainings"]["sgd"]["eval_every"] = 10**5
    cfg["results"] = "results"
    harness.write_config(project / "long.yaml", cfg)
    target = "results/runs/star/none/seed0/history.parquet"
    env = {**harness.env(project), "BNSTUDY_FORKSERVER": "0"}
    proc = subprocess.Popen([sys.executable, "-m", "snakemake", target, "--cores", "1",
                             "--configfile", "long.yaml"], cwd=project, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    lock = project / "results/runs/star/none/seed0" / run_writer.WRITER_FILE
    jobs = []
    try:
        _wait(lock.exists, 240, "the train job to start")
        jobs = [int(json.loads(lock.read_text())["pid"])]
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        _wait(lambda: all(_gone(p) for p in jobs), 15, f"the train job {jobs} to stop")
    finally:
        if proc.poll() is None:
            proc.kill()
        for pid in jobs:
            if not _gone(pid):
                os.kill(pid, signal.SIGKILL)
    log = next((project / "results/logs/train/star/none").glob("seeds0*.log"))  # its block's
    assert "the Snakemake that started this job" in log.read_text()
