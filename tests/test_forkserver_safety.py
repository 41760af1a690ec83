"""The fork server against other users and hostile or slow clients (bnstudy.forkserver, "Safety"):
nobody else can reach it, no connection delays a served job or ends the server, a job no server
takes in time runs in its own process and never twice, and a served job runs in its own
process's context (limits, umask, nice value; PATH and namespaces as the server's, or refused)."""

from __future__ import annotations

import errno
import json
import os
import re
import resource
import shutil
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from specs import make_spec

from bnstudy import data, forkserver

NOBODY = 65534
as_root = pytest.mark.skipif(os.geteuid() != 0,
                             reason="another user's connection needs root to become 'nobody'")


def _wait_for(path: Path, pattern: str, timeout: float = 120) -> re.Match:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        m = re.search(pattern, path.read_text())
        if m:
            return m
        time.sleep(0.05)
    raise AssertionError(f"{pattern!r} not in {path}:\n{path.read_text()[-3000:]}")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    log = tmp_path_factory.mktemp("server") / "forkserver.log"
    old = os.environ.pop(forkserver.ADDRESS, None)
    forkserver.start(True, str(log))
    try:
        _wait_for(log, r"ready \(pid \d+\)")
        env = {**os.environ, "OMP_NUM_THREADS": "1"}
        path = env[forkserver.ADDRESS].rpartition(":")[0]
        yield {"log": log, "env": env, "path": path, "pid": forkserver._server.pid}
    finally:
        forkserver.stop()
        if old is not None:
            os.environ[forkserver.ADDRESS] = old


STARTED = ") started"  # bnstudy.forkserver.server logs "<verb> (pid N) started"


def _help_job(server, env: dict | None = None) -> tuple[float, bool]:
    """A ``python -m bnstudy --help`` job: (its wall seconds, whether the server ran it).
    Served jobs are counted by their "started" lines, which the server writes right after it
    forks the child (read again for up to 3 s: under load the child may finish first); a job's
    "exit" line may come long after the job returned (the child reports to the job first, the
    server logs when it reaps), so an earlier job's late exit line must not count as this
    job's."""
    before = server["log"].read_text().count(STARTED)
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "bnstudy", "--help"], env=env or server["env"],
                          capture_output=True, text=True, timeout=120)
    wall = time.monotonic() - t0
    assert proc.returncode == 0 and "usage" in proc.stdout, proc.stderr[-2000:]
    deadline = time.monotonic() + 3.0
    while server["log"].read_text().count(STARTED) == before and time.monotonic() < deadline:
        time.sleep(0.05)
    return wall, server["log"].read_text().count(STARTED) > before


def _as_nobody(fn) -> str:
    """What ``fn()`` returns (a string) when run in a forked child as the user 'nobody'."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(r)
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            out = fn()
        except BaseException as e:  # noqa: BLE001 - reported to the test
            out = f"{type(e).__name__}: {e}"
        os.write(w, out.encode())
        os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        out = f.read().decode()
    os.waitpid(pid, 0)
    return out


def test_the_socket_is_a_file_only_its_user_can_reach(server):
    directory = os.path.dirname(server["path"])
    st = os.lstat(directory)
    assert stat.S_ISDIR(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o700
    assert st.st_uid == os.getuid()
    sock = os.lstat(server["path"])
    assert stat.S_ISSOCK(sock.st_mode) and stat.S_IMODE(sock.st_mode) == 0o600
    abstract = [line for line in Path("/proc/net/unix").read_text().splitlines()
                if " @bnstudy" in line]
    assert not abstract, abstract  # no name in the abstract namespace (anyone could connect)


@as_root
def test_another_user_cannot_connect(server):
    def connect() -> str:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.connect(server["path"])
        return "connected"

    assert _as_nobody(connect).startswith("PermissionError")
    wall, served = _help_job(server)
    assert served


@as_root
def test_another_users_connection_is_closed_before_a_byte_is_read(server):
    """Even where another user can reach the socket (opened up here), the server checks the
    peer's user at accept and closes its connection unread, and jobs are not delayed."""
    directory = os.path.dirname(server["path"])
    os.chmod(directory, 0o711)
    os.chmod(server["path"], 0o666)
    try:
        def hold() -> str:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                s.connect(server["path"])
                s.settimeout(20)
                t0 = time.monotonic()
                got = s.recv(1)
                return f"{got!r} after {time.monotonic() - t0:.1f}s"

        out = _as_nobody(hold)
    finally:
        os.chmod(directory, 0o700)
        os.chmod(server["path"], 0o600)
    got, _, after = out.partition(" after ")
    assert got == "b''" and float(after.rstrip("s")) < 3, out
    _wait_for(server["log"], f"refused a job: a connection of user id {NOBODY}", 60)
    assert _help_job(server)[1]


def _trickle(path: str, stop: threading.Event, ended: list) -> None:
    """A client that sends a request's header, then a byte every half second."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.connect(path)
        s.sendall(forkserver.INT.pack(1000))
        while not stop.wait(0.5):
            try:
                s.send(b" ")
            except OSError:  # the server closed it
                ended.append(time.monotonic())
                return


def test_idle_and_trickling_connections_do_not_delay_a_served_job(server):
    base, served = _help_job(server)
    assert served
    idle = [socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) for _ in range(6)]
    stop, ended = threading.Event(), []
    trickler = threading.Thread(target=_trickle, args=(server["path"], stop, ended))
    try:
        for s in idle:
            s.connect(server["path"])
        trickler.start()
        time.sleep(0.5)
        t0 = time.monotonic()
        wall, served = _help_job(server)
        assert served, server["log"].read_text()[-2000:]
        assert wall < base + 3, f"a served job took {wall:.1f} s beside idle connections " \
                                f"({base:.1f} s alone)"
        trickler.join(timeout=forkserver.REQUEST_DEADLINE + 10)
        assert ended and ended[0] - t0 < forkserver.REQUEST_DEADLINE + 2, \
            "the server kept a trickling request past its deadline"
        for s in idle:  # refused at the deadline: "R", then closed
            s.settimeout(10)
            assert s.recv(8) == b"R"
    finally:
        stop.set()
        for s in idle:
            s.close()
    _wait_for(server["log"], r"refused a job: no whole request within", 60)


def _raw_request(path: str, header: bytes, body: bytes) -> bytes:
    """What the server answers a hand-made request (b"" when it closes without a word)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(30)
        s.connect(path)
        try:
            s.sendall(header + body)
        except OSError:  # refused before it was all sent
            pass
        return s.recv(64)


@pytest.mark.parametrize("case", ["2 GiB", "negative", "nested", "not an object", "wrong types",
                                  "not JSON"])
def test_hostile_requests_are_refused_and_the_server_goes_on(server, case):
    pack = forkserver.INT.pack
    body = {"nested": b"[" * 400_000, "not an object": b"[1, 2]",
            "wrong types": json.dumps({"token": 1, "argv": "x"}).encode(),
            "not JSON": b"\xff\xfe{"}.get(case, b"")
    header = {"2 GiB": pack(2**31 - 1), "negative": pack(-5)}.get(case, pack(len(body)))
    t0 = time.monotonic()
    assert _raw_request(server["path"], header, body or b"x" * 1000) == b"R"
    assert time.monotonic() - t0 < 5
    assert os.waitpid(server["pid"], os.WNOHANG) == (0, 0), "the server ended"
    assert _help_job(server)[1]


def test_a_job_not_taken_in_time_runs_in_its_own_process(server, tmp_path):
    os.kill(server["pid"], signal.SIGSTOP)
    try:
        t0 = time.monotonic()
        proc = subprocess.run(_prepare("star.npz"), cwd=tmp_path, env=server["env"],
                              capture_output=True, text=True, timeout=300)
        wall = time.monotonic() - t0
    finally:
        os.kill(server["pid"], signal.SIGCONT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (tmp_path / "star.npz").exists()
    assert forkserver.REPLY_TIMEOUT <= wall < forkserver.REPLY_TIMEOUT + 60


def test_a_child_runs_nothing_until_its_job_confirms(server, tmp_path):
    """A job that gave up (no "G" after the child's pid) runs itself: its child must not run."""
    req = json.dumps({"token": server["env"][forkserver.ADDRESS].rpartition(":")[2],
                      "argv0": "-m", "argv": _prepare("star.npz")[3:], "cwd": str(tmp_path),
                      "env": server["env"], **forkserver.identity()}).encode()
    reply = _raw_request(server["path"], forkserver.INT.pack(len(req)), req)
    assert reply[:1] == b"P", reply
    child = forkserver.INT.unpack(reply[1:5])[0]
    _wait_for(server["log"], rf"a job withdrew before its child \(pid {child}\) ran it", 30)
    _wait_for(server["log"], rf"prepare-data \(pid {child}\): exit 0", 30)
    assert not (tmp_path / "star.npz").exists()


def _prepare(out: str) -> list[str]:
    return [sys.executable, "-m", "bnstudy", "prepare-data", "--name", "star", "--kind", "star2d",
            "--options", json.dumps({"n_train": 32, "n_test": 32, "seed": 0}), "--out", out]


def test_a_job_with_another_path_runs_in_its_own_process(server, tmp_path):
    env = {**server["env"], "PATH": f"{tmp_path}:{server['env']['PATH']}"}
    assert not _help_job(server, env)[1]
    _wait_for(server["log"], "refused a job: its PATH is not the server's", 60)


def test_a_job_in_another_mount_namespace_runs_in_its_own_process(server):
    unshare = shutil.which("unshare")
    if unshare is None or subprocess.run([unshare, "-m", "true"]).returncode != 0:
        pytest.skip("cannot make a mount namespace here (unshare -m)")
    before = server["log"].read_text().count("--help (pid")
    proc = subprocess.run([unshare, "-m", sys.executable, "-m", "bnstudy", "--help"],
                          env=server["env"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "usage" in proc.stdout, proc.stderr
    assert server["log"].read_text().count("--help (pid") == before
    _wait_for(server["log"], "refused a job: its process is in another mnt namespace", 60)


TRAINING = {"lr": 0.05, "momentum": 0.9, "batch_size": 16, "steps": 60, "eval_every": 20,
            "checkpoints": [0, 1, 20, 40]}


def _train(steps: int = TRAINING["steps"]) -> list[str]:
    spec = make_spec(norm="batchnorm", training={**TRAINING, "steps": steps})
    return [sys.executable, "-m", "bnstudy", "train", "--data", "star.npz", "--spec",
            json.dumps(spec), "--device", "cpu", "--threads", "1", "--resume", "resume.pt",
            "--out-checkpoints", "checkpoints.pt", "--out-history", "history.parquet"]


def _job_dir(tmp_path: Path, name: str) -> Path:
    d = tmp_path / name
    d.mkdir()
    data.save(data.make("star2d", {"n_train": 64, "n_test": 64, "seed": 0}), d / "star.npz")
    return d


def test_a_served_job_honours_its_file_size_limit(server, tmp_path):
    """``ulimit -f``: the job fails the same way served or in its own process, and neither
    writes a file past the limit."""
    limit = 8192

    def run(d: Path, env: dict) -> subprocess.CompletedProcess:
        return subprocess.run(_train(), cwd=d, env=env, capture_output=True, text=True,
                              timeout=300, preexec_fn=lambda: resource.setrlimit(
                                  resource.RLIMIT_FSIZE, (limit, limit)))

    served, alone = _job_dir(tmp_path, "served"), _job_dir(tmp_path, "alone")
    before = server["log"].read_text().count("train (pid")
    a = run(served, server["env"])
    b = run(alone, {k: v for k, v in server["env"].items() if k != forkserver.ADDRESS})
    assert server["log"].read_text().count("train (pid") > before, "the server did not run it"
    # the exit status is the errno: EFBIG (bnstudy.cli.main.DISK_STATUS)
    assert a.returncode == b.returncode == errno.EFBIG, (a.stderr[-2000:], b.stderr[-2000:])
    assert a.stderr.splitlines()[-1] == b.stderr.splitlines()[-1]
    assert "File too large" in a.stderr.splitlines()[-1]
    for d in (served, alone):
        assert sorted(p.name for p in d.iterdir()) == ["star.npz"]


def test_a_served_child_takes_its_jobs_limits_umask_and_nice_value(server, tmp_path):
    d = _job_dir(tmp_path, "run")

    def context():
        os.umask(0o027)
        os.nice(3)
        resource.setrlimit(resource.RLIMIT_NOFILE, (300, 400))

    seen = set(re.findall(r"train \(pid (\d+)\) started", server["log"].read_text()))
    job = subprocess.Popen(_train(steps=10**6), cwd=d, env=server["env"], preexec_fn=context,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline, new = time.monotonic() + 120, set()
        while not new and time.monotonic() < deadline:
            time.sleep(0.05)
            new = set(re.findall(r"train \(pid (\d+)\) started",
                                 server["log"].read_text())) - seen
        assert new, server["log"].read_text()[-2000:]
        child = int(new.pop())
        time.sleep(0.5)  # past the child's taking on the job's context
        status = Path(f"/proc/{child}/status").read_text()
        assert re.search(r"^Umask:\s+0027$", status, re.M), status
        assert os.getpriority(os.PRIO_PROCESS, child) == os.getpriority(os.PRIO_PROCESS, 0) + 3
        assert resource.prlimit(child, resource.RLIMIT_NOFILE) == (300, 400)
    finally:
        job.kill()
        job.wait(timeout=60)
