"""A fork server's child (:mod:`bnstudy.forkserver.server` forks it): it takes on its job's
process context, waits for the job to confirm, becomes the job (its streams, working directory,
environment and arguments) and runs :func:`bnstudy.cli.main.main`, then reports its exit status."""

from __future__ import annotations

import os
import signal
import socket
import sys
import threading
import time
import traceback

from bnstudy.forkserver import GO_TIMEOUT, INT, context


def log(msg: str) -> None:
    try:
        print(f"{time.strftime('%Y-%m-%d %H:%M:%S')} {msg}", flush=True)
    except (OSError, ValueError):  # a full disk ... (or a child's job's file size limit)
        pass


def become(conn: socket.socket, req: dict, job: dict, own: dict) -> None:
    """Take on the job's limits, umask and nice value; wait for the job to confirm (its "G" and
    standard streams); become the job (its streams, directory, environment and arguments); run
    the verb; exit."""
    code, done = 1, threading.Event()
    try:
        context.apply(job, own)
    except (OSError, ValueError) as e:  # refused: the job runs in its own process
        log(f"refused a job: cannot take on its process context ({e})")
        send(conn, b"R")
        os._exit(0)
    fds: list[int] = []
    try:
        conn.setblocking(True)
        conn.sendall(b"P" + INT.pack(os.getpid()))
        conn.settimeout(GO_TIMEOUT)
        go, fds, _, _ = socket.recv_fds(conn, 1, 3, socket.MSG_CMSG_CLOEXEC)
        if go != b"G" or len(fds) != 3:
            raise EOFError
        conn.settimeout(None)
    except (OSError, EOFError):  # the job gave up waiting and runs in its own process
        log(f"a job withdrew before its child (pid {os.getpid()}) ran it")
        os._exit(0)
    try:
        for i, fd in enumerate(fds):
            os.dup2(fd, i)
        for fd in fds:
            if fd > 2:
                os.close(fd)
        os.chdir(req["cwd"])
        os.environ.clear()
        os.environ.update(req["env"])
        sys.argv = [req["argv0"], *req["argv"]]
        threading.Thread(target=_end_with_job, args=(conn, done), daemon=True).start()
        code = run(req["argv"])
    except KeyboardInterrupt:  # a forwarded Ctrl-C ends the child as it ends Python
        sys.stderr.flush()
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    except BaseException:  # noqa: BLE001 - reported as Python reports an uncaught exception
        traceback.print_exc()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    done.set()  # the job closes its end once it has the status: not a reason to stop any more
    send(conn, b"S" + INT.pack(code))
    os._exit(code)


def send(conn: socket.socket, data: bytes) -> None:
    try:
        conn.sendall(data)
    except OSError:
        pass


def run(argv: list[str]) -> int:
    from bnstudy.cli.main import main

    try:
        return main(argv) or 0
    except SystemExit as e:  # what the interpreter makes of SystemExit
        if e.code is None or isinstance(e.code, int):
            return e.code or 0
        print(e.code, file=sys.stderr)
        return 1


def _end_with_job(conn: socket.socket, done: threading.Event) -> None:
    """The job sends nothing after its request: end of file before the child is done means the
    job is gone (killed), and the child ends too."""
    try:
        conn.recv(1)
    except OSError:
        pass
    if not done.is_set():
        os.kill(os.getpid(), signal.SIGTERM)


