"""The fork server (bnstudy.forkserver): a job it runs is the job its own process would run
(bitwise the same files, the same exit status, streams, working directory), a job it cannot
take runs in its own process, signals and deaths reach the child, and the server ends with
Snakemake. The workflow tests run every local job through it (tests/test_workflow.py checks
that they did); here a training and two measure jobs, served and in their own processes, write
the same files bit for bit."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import harness
import pandas as pd
import pytest
from specs import make_spec

from bnstudy import data, forkserver, io
from bnstudy.train import checkpoints

TRAINING = {"lr": 0.05, "momentum": 0.9, "batch_size": 16, "steps": 60, "eval_every": 20,
            "checkpoints": [0, 1, 20, 40]}


def _wait_for(path: Path, pattern: str, timeout: float = 120) -> re.Match:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        m = re.search(pattern, path.read_text() if path.exists() else "")
        if m:
            return m
        time.sleep(0.05)
    raise AssertionError(f"{pattern!r} not in {path}:\n"
                         f"{path.read_text()[-3000:] if path.exists() else '(none)'}")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """A server started as the Snakefile's onstart starts it (this process standing for
    Snakemake); ``env``: a job's environment, with the server's address."""
    log = tmp_path_factory.mktemp("server") / "forkserver.log"
    old = os.environ.pop(forkserver.ADDRESS, None)
    forkserver.start(True, str(log))
    try:
        _wait_for(log, r"ready \(pid \d+\)")
        env = {**os.environ, "OMP_NUM_THREADS": "1"}
        yield {"log": log, "env": env, "pid": forkserver._server.pid}
    finally:
        forkserver.stop()
        if old is not None:
            os.environ[forkserver.ADDRESS] = old


def _exits(log: Path) -> list[tuple[str, str]]:
    """``(verb, exit status)`` of each job the server logged as ended, in order."""
    return re.findall(r"(\S+) \(pid \d+\): exit (-?\d+)", log.read_text())


def _served(log: Path) -> int:
    return len(_exits(log))


@pytest.fixture(scope="module")
def star_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("data") / "star.npz"
    data.save(data.make("star2d", {"n_train": 64, "n_test": 64, "seed": 0}), path)
    return path


def _wait_for_served(log: Path, n: int, timeout: float = 120) -> None:
    """Until the server has logged the exit of ``n`` jobs (the job's client may return before
    the server writes its line)."""
    deadline = time.monotonic() + timeout
    while _served(log) < n and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _served(log) == n, f"the server did not run the job:\n{log.read_text()[-2000:]}"


def _train_cmd(npz: Path, out: Path, steps: int = TRAINING["steps"]) -> list[str]:
    spec = make_spec(norm="batchnorm", training={**TRAINING, "steps": steps})
    return [sys.executable, "-m", "bnstudy", "train", "--data", str(npz), "--spec",
            json.dumps(spec), "--device", "cpu", "--threads", "1", "--resume",
            str(out / "resume.pt"), "--out-checkpoints", str(out / "checkpoints.pt"),
            "--out-history", str(out / "history.parquet")]


def _no_server_env(env: dict) -> dict:
    return {k: v for k, v in env.items() if k != forkserver.ADDRESS}


def test_a_served_job_writes_bitwise_what_its_own_process_writes(server, star_file, tmp_path):
    served, alone = tmp_path / "served", tmp_path / "alone"
    served.mkdir()
    alone.mkdir()
    before = _served(server["log"])
    a = subprocess.run(_train_cmd(star_file, served), env=server["env"], capture_output=True,
                       text=True, timeout=300)
    b = subprocess.run(_train_cmd(star_file, alone), env=_no_server_env(server["env"]),
                       capture_output=True, text=True, timeout=300)
    assert a.returncode == 0 and b.returncode == 0, a.stderr[-2000:] + b.stderr[-2000:]
    _wait_for_served(server["log"], before + 1)  # (asserts the server ran it)
    # the job's log is its own: the child wrote the training log to the job's stderr
    assert "trained {" in a.stderr and "trained {" in b.stderr
    ra, rb = checkpoints.load(served / "checkpoints.pt"), checkpoints.load(alone / "checkpoints.pt")
    for ca, cb in zip(ra["checkpoints"], rb["checkpoints"], strict=True):
        assert ca["step"] == cb["step"]
        for k in ca["model"]:
            assert ca["model"][k].equal(cb["model"][k]), (ca["step"], k)
    ha, hb = (pd.read_parquet(d / "history.parquet").drop(columns="wall_time")
              for d in (served, alone))
    pd.testing.assert_frame_equal(ha, hb, check_exact=True)
    assert io.read_provenance(served / "history.parquet")["config_hash"] == \
        io.read_provenance(alone / "history.parquet")["config_hash"]


# the tiny study's options (.test/config.yaml): probes, a Hessian Lanczos iteration and random
# point sets, all seeded -- what a server's state (threads, RNG, kernels) would change
MEASURE_OPTIONS = {
    "smoothness": {"multipliers": [0.5, 4.0], "n_probes": 3, "hessian": True,
                   "hessian_iters": 5, "seed": 0},
    "partition_density": {"radii": [0.03, 0.1], "method": "distance", "n_vertices": 40,
                          "n_points": 32, "point_sets": ["train", "test", "random"],
                          "bn_statistics": "train_set", "seed": 0},
}


@pytest.fixture(scope="module")
def trained_results(server, star_file, tmp_path_factory) -> Path:
    """A results directory holding one run (experiment ``t`` of :func:`make_spec`, batchnorm,
    seed 0) trained by the server."""
    results = tmp_path_factory.mktemp("trained") / "results"
    run = results / "runs" / "t" / "batchnorm" / "seed0"
    run.mkdir(parents=True)
    before = _served(server["log"])
    proc = subprocess.run(_train_cmd(star_file, run), env=server["env"], capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    _wait_for_served(server["log"], before + 1)  # its exit logged: the tests count the next
    return results


@pytest.mark.parametrize("measure", sorted(MEASURE_OPTIONS))
def test_a_served_measure_job_writes_bitwise_what_its_own_process_writes(
        server, star_file, trained_results, tmp_path, measure):
    """A measure job, as the workflow's measure rule runs it, served and in its own process:
    the same table, bit for bit (the workflow's determinism test reruns the whole tiny study
    through the server; this is where a job's own process is compared)."""
    from bnstudy import measures

    grid = {"t": {"norms": ["batchnorm"], "seeds": [0]}}
    tables = {}
    for tag, env in (("served", server["env"]), ("alone", _no_server_env(server["env"]))):
        outs = [tmp_path / tag / f"{t}.parquet" for t in measures.get(measure).tables]
        outs[0].parent.mkdir()
        before = _served(server["log"])
        proc = subprocess.run(
            [sys.executable, "-m", "bnstudy", "measure", measure, "--results",
             str(trained_results), "--experiment", "t", "--grid", json.dumps(grid),
             "--data", str(star_file), "--options", json.dumps(MEASURE_OPTIONS[measure]),
             "--device", "cpu", "--threads", "1", "--out", *map(str, outs)],
            env=env, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr[-3000:]
        if tag == "served":
            _wait_for_served(server["log"], before + 1)
            assert _exits(server["log"])[-1] == ("measure", "0"), _exits(server["log"])[-3:]
        else:
            assert _served(server["log"]) == before
        tables[tag] = {o.name: pd.read_parquet(o) for o in outs}
    for name, served in tables["served"].items():
        alone = tables["alone"][name]
        assert len(served), name
        volatile = [c for c in served.columns if c in harness.VOLATILE_COLUMNS]
        pd.testing.assert_frame_equal(served.drop(columns=volatile),
                                      alone.drop(columns=volatile), check_exact=True, obj=name)


def test_what_the_server_imported_is_frozen_out_of_the_childrens_collections(server):
    """After its imports the server moves its heap into the collector's permanent generation
    (gc.freeze): a child's collections neither walk those objects nor write to (and so copy)
    the pages the fork shared. Without it the tiny study's served jobs took about 15% more CPU."""
    m = _wait_for(server["log"], r"preloaded: (\d+) objects frozen")
    assert int(m.group(1)) > 100_000, m.group(0)  # torch, pandas, matplotlib, the package


def test_exit_status_streams_and_working_directory_are_the_jobs(server, tmp_path):
    before = _served(server["log"])
    bad = subprocess.run([sys.executable, "-m", "bnstudy", "train", "--threads", "x"],
                         env=server["env"], capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2
    assert "python -m bnstudy train" in bad.stderr and "--threads" in bad.stderr, bad.stderr
    # a relative output lands in the job's working directory, not the server's
    (tmp_path / "job").mkdir()
    ok = subprocess.run([sys.executable, "-m", "bnstudy", "prepare-data", "--name", "star",
                         "--kind", "star2d", "--options",
                         json.dumps({"n_train": 32, "n_test": 32, "seed": 0}),
                         "--out", "star.npz"], cwd=tmp_path / "job", env=server["env"],
                        capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0, ok.stderr[-2000:]
    assert (tmp_path / "job" / "star.npz").exists()
    _wait_for(server["log"], r"prepare-data \(pid \d+\): exit 0")
    assert _served(server["log"]) == before + 2


@pytest.mark.parametrize("address", ["no-such-server:token", "WRONG_TOKEN"])
def test_a_job_no_server_takes_runs_in_its_own_process(server, star_file, tmp_path, address):
    env = dict(server["env"])
    if address == "WRONG_TOKEN":
        path = env[forkserver.ADDRESS].rpartition(":")[0]
        env[forkserver.ADDRESS] = f"{path}:not-the-token"
    else:
        env[forkserver.ADDRESS] = address
    before = _served(server["log"])
    proc = subprocess.run(_train_cmd(star_file, tmp_path), env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (tmp_path / "checkpoints.pt").exists()
    assert _served(server["log"]) == before
    if address == "WRONG_TOKEN":
        _wait_for(server["log"], "refused a job: a wrong token")


def test_the_switch_turns_the_server_off(tmp_path):
    env = {**os.environ, forkserver.SWITCH: "0"}
    code = ("from bnstudy import forkserver; import os, sys; "
            f"forkserver.start(True, {str(tmp_path / 'log')!r}); "
            "print(forkserver._server is None, forkserver.ADDRESS in os.environ)")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=60)
    assert out.stdout.split() == ["True", "False"], out.stderr
    code = code.replace("True, ", "False, ")  # a cluster's jobs: never a server
    out = subprocess.run([sys.executable, "-c", code], env=os.environ, capture_output=True,
                         text=True, timeout=60)
    assert out.stdout.split() == ["True", "False"], out.stderr


def _set_aside(monkeypatch) -> None:
    """This worker's module server (the fixture's) set aside for the test, not stopped: the
    test's own forkserver.start() starts another."""
    monkeypatch.delenv(forkserver.ADDRESS, raising=False)
    monkeypatch.setattr(forkserver, "_server", None)
    monkeypatch.setattr(forkserver, "_directory", None)


def _sigint_default() -> None:
    """The job's SIGINT not ignored, whatever this test process has: a shell's background job
    (``pytest ... &``) ignores SIGINT, and a process started so keeps ignoring it, served or not
    (its child takes the job's dispositions)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _start_long_job(server, star_file, out: Path) -> tuple[subprocess.Popen, int]:
    """A long served training; (the job's process, its child's pid)."""
    out.mkdir()
    seen = set(re.findall(r"train \(pid (\d+)\) started", server["log"].read_text()))
    job = subprocess.Popen(_train_cmd(star_file, out, steps=10**6), env=server["env"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           preexec_fn=_sigint_default)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        new = set(re.findall(r"train \(pid (\d+)\) started", server["log"].read_text())) - seen
        if new:
            return job, int(new.pop())
        time.sleep(0.05)
    job.kill()
    raise AssertionError(server["log"].read_text()[-2000:])


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_to_the_job_reaches_its_child(server, star_file, tmp_path, sig):
    job, child = _start_long_job(server, star_file, tmp_path / "run")
    time.sleep(1.0)  # into the training loop
    job.send_signal(sig)
    try:
        job.wait(timeout=60)
    except subprocess.TimeoutExpired:
        job.kill()
        alive = Path(f"/proc/{child}").exists()
        raise AssertionError(f"{sig!r} did not end the job (its child {child}, alive: {alive})"
                             f":\n{server['log'].read_text()[-2000:]}") from None
    assert job.returncode == -sig  # the job ends as its child did: by the signal
    assert _ended(child)
    _wait_for(server["log"], rf"train \(pid {child}\): exit -{int(sig)}")


def test_a_job_s_child_takes_the_job_s_signal_dispositions_not_the_server_s(star_file, tmp_path,
                                                                             monkeypatch):
    """A server started while SIGINT was ignored (a thread's ``system()`` ignores it in the
    whole process while its command runs; ``nohup``): its children used to inherit that, so a
    Ctrl-C handed on to a served job's child was lost and the job never ended. The child now
    takes the job's own dispositions (the kernel's ``SigIgn`` of the job's process)."""
    log = tmp_path / "forkserver.log"
    _set_aside(monkeypatch)  # a server of its own
    old = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        forkserver.start(True, str(log))  # the server inherits the ignored SIGINT
    finally:
        signal.signal(signal.SIGINT, old)
    try:
        _wait_for(log, r"ready \(pid \d+\)")
        served = {"log": log, "env": {**os.environ, "OMP_NUM_THREADS": "1"}}
        job, child = _start_long_job(served, star_file, tmp_path / "run")
        time.sleep(1.0)
        job.send_signal(signal.SIGINT)
        try:
            job.wait(timeout=30)
        except subprocess.TimeoutExpired:
            job.kill()
            os.kill(child, signal.SIGKILL)
            raise AssertionError(f"SIGINT did not end the job:\n{log.read_text()[-2000:]}") \
                from None
        assert job.returncode == -signal.SIGINT
        _wait_for(log, rf"train \(pid {child}\): exit -{int(signal.SIGINT)}")
    finally:
        forkserver.stop()


def test_a_killed_job_takes_its_child_with_it(server, star_file, tmp_path):
    """SIGKILL (the out-of-memory killer, a test killing the job) cannot be forwarded: the child
    sees its job's end of the connection close and ends."""
    job, child = _start_long_job(server, star_file, tmp_path / "run")
    job.kill()
    job.wait(timeout=60)
    assert _ended(child), "the child of a killed job kept running"


def test_a_child_killed_by_a_signal_kills_its_job_alike(server, star_file, tmp_path):
    """The out-of-memory killer picks the child (it holds the memory): Snakemake must see its job
    killed by SIGKILL, as it would have been in its own process (then retried, resumed)."""
    job, child = _start_long_job(server, star_file, tmp_path / "run")
    time.sleep(0.5)
    os.kill(child, signal.SIGKILL)
    job.wait(timeout=60)
    assert job.returncode == -signal.SIGKILL
    _wait_for(server["log"], rf"train \(pid {child}\): exit -9")


def test_the_server_ends_with_snakemake(tmp_path):
    """A Snakemake killed without running its onsuccess/onerror (SIGKILL) leaves no server."""
    log = tmp_path / "forkserver.log"
    code = ("from bnstudy import forkserver; import sys, time; "
            f"forkserver.start(True, {str(log)!r}); print(forkserver._server.pid, flush=True); "
            "time.sleep(600)")
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                              env={k: v for k, v in os.environ.items()
                                   if k != forkserver.ADDRESS})
    try:
        pid = int(parent.stdout.readline())
        _wait_for(log, r"ready \(pid \d+\)")
        parent.kill()
        parent.wait(timeout=30)
        assert _ended(pid), "the server outlived its Snakemake"
        assert "Snakemake is gone" in log.read_text()
    finally:
        if parent.poll() is None:
            parent.kill()


def _ended(pid: int, timeout: float = 20) -> bool:
    """Whether process ``pid`` ended within ``timeout`` seconds: gone, or a zombie not reaped yet
    (a server whose parent was killed has nobody here to reap it)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return True
        if state in ("Z", "X"):
            return True
        time.sleep(0.05)
    return False


HELP = [sys.executable, "-m", "bnstudy", "--help"]  # a job that imports nothing heavy itself


@pytest.fixture
def own_server(tmp_path, monkeypatch):
    """A server of this test's own, started now (the module's is set aside, not stopped)."""
    _set_aside(monkeypatch)
    log = tmp_path / "forkserver.log"
    forkserver.start(True, str(log))
    try:
        yield {"log": log, "env": {**os.environ, "OMP_NUM_THREADS": "1"},
               "pid": forkserver._server.pid}
    finally:
        forkserver.stop()


def test_a_job_started_while_the_server_imports_waits_for_it(own_server, tmp_path):
    """Snakemake starts its first jobs right after onstart, while the server is still importing
    (seconds): they used to find no socket and each import torch and pandas in its own process
    beside the server (two such jobs: 11 of the tiny study's 100 CPU-s). They wait for it now."""
    assert "ready" not in (own_server["log"].read_text() if own_server["log"].exists() else "")
    proc = subprocess.run(HELP, env=own_server["env"], capture_output=True, text=True,
                          timeout=180)
    assert proc.returncode == 0 and "usage" in proc.stdout, proc.stderr[-2000:]
    _wait_for(own_server["log"], r"--help \(pid \d+\): exit 0")
    assert _served(own_server["log"]) == 1


def test_a_job_does_not_wait_for_a_server_that_died_importing(own_server, tmp_path):
    """A server gone before it listens (killed, a crash while importing; here a zombie that its
    parent has not reaped yet) is not waited for: the job runs in its own process at once."""
    os.kill(own_server["pid"], signal.SIGKILL)
    time.sleep(0.2)
    t0 = time.monotonic()
    proc = subprocess.run(HELP, env=own_server["env"], capture_output=True, text=True,
                          timeout=180)
    assert proc.returncode == 0 and "usage" in proc.stdout, proc.stderr[-2000:]
    assert time.monotonic() - t0 < forkserver.STARTUP_TIMEOUT / 2
    assert _served(own_server["log"]) == 0


@pytest.mark.parametrize("jobs, checkpoints, worth", [
    (None, False, True),  # not known: a server
    (["prepare_data"], False, False),
    (["prepare_data", "train", *["job_arguments"] * 5], False, False),  # 2 served
    (["prepare_data", "train", "aggregate"], False, True),
    (["replication_round"], True, True),  # later jobs not known yet
])
def test_a_server_starts_for_runs_with_jobs_enough_to_pay_for_it(jobs, checkpoints, worth):
    assert forkserver.worth_starting(jobs, checkpoints) is worth


def test_a_run_of_too_few_jobs_starts_no_server_and_says_so(tmp_path, monkeypatch):
    _set_aside(monkeypatch)
    log = tmp_path / "logs" / "forkserver.log"
    forkserver.start(True, str(log), ["train", "job_arguments"], False)
    assert forkserver._server is None and forkserver.ADDRESS not in os.environ
    assert "no fork server: 1 of the run's 2 jobs would be served, fewer than 3" in \
        log.read_text()
