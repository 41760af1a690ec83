"""Stopping the fork server right after the last job (Snakemake's onsuccess stops it as soon as
that job's process has exited): the job's child may still be ending then, and its exit must be
logged, not lost with a server that SIGTERM killed on the spot."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time

from bnstudy import forkserver


def _wait_ready(log, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if log.exists() and re.search(r"ready \(pid \d+\)", log.read_text()):
            return
        time.sleep(0.05)
    raise AssertionError(log.read_text() if log.exists() else "no server log")


def test_a_stop_right_after_the_last_job_still_logs_its_exit(tmp_path):
    log = tmp_path / "forkserver.log"
    old = os.environ.pop(forkserver.ADDRESS, None)
    forkserver.start(True, str(log))
    try:
        _wait_ready(log)
        for _ in range(3):  # each job's child ends after its job has: stop at once after it
            job = subprocess.run([sys.executable, "-m", "bnstudy", "list"], capture_output=True,
                                 text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
            assert job.returncode == 0, job.stderr
        forkserver.stop()
    finally:
        forkserver.stop()
        if old is not None:
            os.environ[forkserver.ADDRESS] = old
    text = log.read_text()
    started = re.findall(r"list \(pid (\d+)\) started", text)
    ended = re.findall(r"list \(pid (\d+)\): exit 0, [\d.]+ CPU-s$", text, re.M)
    assert len(started) == 3, text  # the jobs were served
    assert sorted(ended) == sorted(started), text
    assert "stopping" in text
