"""A warm start for the workflow's local jobs: one process imports torch, pandas, matplotlib and
the package once, and each ``python -m bnstudy`` job runs in a child forked from it.

Every job of the workflow is a fresh ``python -m bnstudy VERB ...`` process, and most of a small
job is start-up: ``import torch`` alone is 1.4 s on the 2-core reference machine and pandas
0.45 s more, against half a second of training for a default-study run
(``benchmarks/bench_startup.py``). When Snakemake runs the jobs on this machine, the Snakefile's
``onstart`` calls :func:`start`: a server process (:mod:`bnstudy.forkserver.server`) imports
those libraries and every package module, then listens on a Unix socket. A job's
``python -m bnstudy`` then only connects (:func:`delegate`, tens of milliseconds): it passes its
arguments, working directory, environment and standard streams (the file descriptors
themselves, so its log is its own); the server forks a child that takes on the job's process
context and runs the verb exactly as the job's own process would (:func:`bnstudy.cli.main.main`),
and the job exits with the child's status, or is killed by the child's signal.

What does not change: each job is still a Snakemake job with its command, log, exit status,
retries and rerun triggers, and its results are bitwise the same (``tests/test_forkserver.py``
compares them). A job that starts while the server is still importing waits for it (up to
:data:`STARTUP_TIMEOUT` seconds, while the server lives: its own process would spend those
seconds on the same imports, on a core the server needs). A job that no server takes runs in its
own process as before: none running (``snakemake -n``, a job run by hand), none ready in time or
one that ended while importing, no reply within :data:`REPLY_TIMEOUT` seconds, or a refusal.
A run with fewer jobs to serve than :data:`MIN_JOBS` starts no server (:func:`worth_starting`).

Safety (``tests/test_forkserver_safety.py``):

- Only for jobs Snakemake runs on this machine (``workflow.local_exec``). A cluster's jobs never
  get the server's address, so none escapes the scheduler's accounting, not even on a node that
  also runs Snakemake.
- Nobody else can reach it: the socket is a file in a directory of its own that only its user
  can enter (``mkdtemp``, mode 0700; removed when the server ends). At accept, before reading a
  byte, the server checks the peer's user (``SO_PEERCRED``) and reads its process's context; it
  then serves only a request that presents the random token :func:`start` puts in the jobs'
  environment, from the same Python and this same package.
- Nobody can stall it: requests are read without blocking, many side by side
  (:mod:`bnstudy.forkserver.intake`), each refused past :data:`MAX_REQUEST` bytes,
  :data:`REQUEST_DEADLINE` seconds or at a malformed field; a job not taken within
  :data:`REPLY_TIMEOUT` seconds runs in its own process, and a child runs nothing until its job
  confirms and sends it its standard streams (no job runs twice; the server never holds them).
- A served job runs in its own process's context (:mod:`bnstudy.forkserver.context`): the child
  takes its resource limits, umask, nice value and CPU affinity, and a job in other namespaces,
  another cgroup or root, with other credentials, or whose ``PATH`` (and the like) differs from
  the server's is refused, so programs such as ``git`` resolve as in its own process.
- Fork safety: the server forks from its only Python thread and never computes with torch nor
  initialises CUDA (a child initialises its device itself). The helper threads that numpy's
  OpenBLAS and pyarrow's jemalloc start at import register their own fork handlers, as for
  PyTorch's forked data-loader workers. Settings that libraries read from the environment at
  import (``OMP_NUM_THREADS`` ...) are Snakemake's; the package sets its torch threads itself.
- Lifetimes: :func:`stop` ends the server when Snakemake ends (``onsuccess``/``onerror``), and
  the server ends within a second of a killed Snakemake. A signal to a job (Snakemake cancelling
  it, Ctrl-C) is forwarded to its child, and a child whose job is gone (``SIGKILL``) ends too.
- ``BNSTUDY_FORKSERVER=0`` in Snakemake's environment turns the server off.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import time

SWITCH = "BNSTUDY_FORKSERVER"  # 0, off, false or no: no server
ADDRESS = "BNSTUDY_FORKSERVER_ADDRESS"  # "<socket path>:<token>", set by start() for the jobs
TOKEN = "BNSTUDY_FORKSERVER_TOKEN"  # the server's copy of the token
SOCKET = "socket"  # the socket's name in the server's directory
PIDFILE = "server.pid"  # the server's pid, written by start() before any job has the address
INT = struct.Struct("!i")
MAX_REQUEST = 4 << 20  # bytes of a request's JSON (arguments and environment; Linux caps both)
REQUEST_DEADLINE = 5.0  # seconds from accept to the request's last byte
REPLY_TIMEOUT = 5.0  # seconds a job waits to be taken before it runs in its own process
GO_TIMEOUT = 10.0  # seconds a child waits for its job to confirm before it ends unrun
STARTUP_TIMEOUT = 60.0  # seconds a job waits for a living server to finish its imports
MIN_JOBS = 3  # served jobs from which a run starts a server (worth_starting)
NOT_SERVED = ("job_arguments",)  # rules whose jobs are no `python -m bnstudy` (a script)
# Imported by the server before it serves: what the jobs' verbs import (and bnstudy's modules);
# torch._dynamo is what torch.optim's first step imports (1.3 CPU-s; benchmarks/bench_sgd.py).
PRELOAD = ("numpy", "torch", "torch._dynamo", "pandas", "pyarrow.parquet", "scipy.stats",
           "matplotlib.pyplot", "seaborn")
FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1,
             signal.SIGUSR2)
_server: subprocess.Popen | None = None
_directory: str | None = None


def enabled() -> bool:
    return os.environ.get(SWITCH, "1").strip().lower() not in {"0", "off", "false", "no"}


def identity() -> dict:
    """What a job and the server must share: the interpreter and this package's location."""
    return {"python": os.path.realpath(sys.executable),
            "package": os.path.dirname(os.path.realpath(__file__))}


# -- the Snakemake side ------------------------------------------------------------------------
def private_directory() -> str | None:
    """A new directory only this user can enter (mode 0700), short enough for a socket path
    (Linux: 107 bytes); None if neither the temporary directory nor /tmp gives one."""
    import tempfile

    for parent in (tempfile.gettempdir(), "/tmp"):
        try:
            path = tempfile.mkdtemp(prefix="bnstudy-forkserver-", dir=parent)
        except OSError:
            continue
        if len(os.fsencode(os.path.join(path, SOCKET))) <= 107:
            return path
        os.rmdir(path)
    return None


def worth_starting(jobs: list[str] | None, checkpoints: bool = False) -> bool:
    """Whether a run whose jobs to run are the rules ``jobs`` (None: not known) gains from a
    server: its imports (about 8 CPU-s) pay for themselves from :data:`MIN_JOBS` served jobs
    on (a job in its own process spends 1-6 CPU-s on the same imports), or when the run has
    checkpoints (their later jobs are not known yet). The rules in :data:`NOT_SERVED` run no
    ``python -m bnstudy`` and do not count."""
    return jobs is None or checkpoints or _served(jobs) >= MIN_JOBS


def _served(jobs: list[str]) -> int:
    """How many of the jobs of rules ``jobs`` a server would run."""
    return sum(1 for rule in jobs if rule not in NOT_SERVED)


def start(local: bool, log: str, jobs: list[str] | None = None,
          checkpoints: bool = False) -> None:
    """Start the server for this Snakemake process's local jobs (nothing for a cluster's, when
    switched off, or for a run of fewer jobs than it pays for: :func:`worth_starting`, with
    the rules of the jobs to run, when known); the server logs to ``log``."""
    global _server, _directory
    if _server is not None:
        return
    os.environ.pop(ADDRESS, None)  # this run's server or none (not one this process inherited)
    if not local or not enabled():
        return
    os.makedirs(os.path.dirname(log) or ".", exist_ok=True)
    if not worth_starting(jobs, checkpoints):
        return _no_server(log, f"{_served(jobs)} of the run's {len(jobs)} jobs would be served, "
                               f"fewer than {MIN_JOBS}")
    import secrets

    directory = private_directory()
    if directory is None:
        return _no_server(log, "no private directory for its socket")
    token = secrets.token_hex(16)
    with open(log, "ab") as out:
        # a session of its own: a Ctrl-C in the terminal reaches the jobs, which forward it
        _server = subprocess.Popen(
            [sys.executable, "-m", "bnstudy.forkserver.server", directory, str(os.getpid())],
            stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
            env={**os.environ, TOKEN: token}, start_new_session=True)
    with open(os.path.join(directory, PIDFILE), "w") as f:
        f.write(str(_server.pid))
    _directory = directory
    os.environ[ADDRESS] = f"{os.path.join(directory, SOCKET)}:{token}"


def _no_server(log: str, why: str) -> None:
    with open(log, "a") as out:
        print(f"{time.strftime('%Y-%m-%d %H:%M:%S')} no fork server: {why}; each job runs in its "
              "own process", file=out)


def stop() -> None:
    """End the server :func:`start` started (jobs started afterwards run in their own process)."""
    global _server, _directory
    os.environ.pop(ADDRESS, None)
    if _server is None:
        return
    _server.terminate()
    try:
        _server.wait(timeout=10)
    except subprocess.TimeoutExpired:
        _server.kill()
        _server.wait()
    shutil.rmtree(_directory, ignore_errors=True)  # the server removes it; not when killed
    _server = _directory = None


# -- the job side ------------------------------------------------------------------------------
def recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise EOFError("connection closed")
        buf += chunk
    return buf


def _alive(pid: int) -> bool:
    """Whether process ``pid`` runs (not gone, not a zombie its parent has yet to reap; the
    server reads /proc too: bnstudy.forkserver.context)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()[0] != "Z"
    except OSError:  # gone
        return False


def wait_until_listening(path: str, timeout: float = STARTUP_TIMEOUT) -> bool:
    """Whether the server's socket ``path`` exists, waiting while the server that
    :func:`start` started (its pid file beside the socket) is still importing: at most
    ``timeout`` seconds, and not once that process has ended."""
    if os.path.exists(path):
        return True
    if not os.path.isabs(path):  # start() gives an absolute path; nothing to wait for
        return False
    try:
        with open(os.path.join(os.path.dirname(path), PIDFILE)) as f:
            pid = int(f.read())
    except (OSError, ValueError):  # no server started there
        return False
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        if not _alive(pid) or time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True


def _message(sock: socket.socket) -> tuple[bytes, int]:
    """One reply: (kind, value): P (the child's pid), S (exit status; -N: killed by signal N)
    or R (refused)."""
    kind = recv_exact(sock, 1)
    return kind, (0 if kind == b"R" else INT.unpack(recv_exact(sock, INT.size))[0])


def _stdio() -> list[int]:
    out = []
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
            out.append(fd)
        except OSError:  # a closed standard stream: the child gets /dev/null there
            out.append(os.open(os.devnull, os.O_RDWR))
    return out


def delegate(argv: list[str]) -> int | None:
    """Run ``python -m bnstudy ARGV`` in the server's child; its exit status, or None when no
    server takes the job within :data:`REPLY_TIMEOUT` seconds (the caller runs it itself). A
    child killed by a signal kills this process with the same signal."""
    address = os.environ.get(ADDRESS, "")
    path, _, token = address.rpartition(":")
    if not path or not enabled():
        return None
    payload = json.dumps({"token": token, "argv0": sys.argv[0], "argv": list(argv),
                          "cwd": os.getcwd(), "env": dict(os.environ), **identity()}).encode()
    if len(payload) > MAX_REQUEST or not wait_until_listening(path):
        return None
    deadline = time.monotonic() + REPLY_TIMEOUT
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(REPLY_TIMEOUT)
        sock.connect(path)
        sock.settimeout(max(deadline - time.monotonic(), 0.001))
        sock.sendall(INT.pack(len(payload)) + payload)
        sock.settimeout(max(deadline - time.monotonic(), 0.001))
        kind, pid = _message(sock)
        if kind == b"P":  # the child runs nothing before this: from here on the job is the
            socket.send_fds(sock, [b"G"], _stdio())  # child's, and this process waits for it
    except (OSError, EOFError):  # no server (yet), too slow, or it went away: the child, if
        sock.close()  # any, sees the connection close before "G" and ends without running
        return None
    if kind != b"P":
        sock.close()
        return None
    sock.settimeout(None)

    def forward(signum, _frame):
        try:
            os.kill(pid, signum)
        except ProcessLookupError:
            pass

    for s in FORWARDED:
        signal.signal(s, forward)
    try:
        _, status = _message(sock)
    except (OSError, EOFError):
        print("bnstudy: the fork server ended before this job's child reported its exit "
              "status", file=sys.stderr)
        return 1
    finally:
        sock.close()
    if status < 0:  # end as the child did: killed by the same signal
        if -status not in (signal.SIGKILL, signal.SIGSTOP):  # those two keep their default
            signal.signal(-status, signal.SIG_DFL)
        os.kill(os.getpid(), -status)
        return 128 - status
    return status
