"""The fork server itself (:mod:`bnstudy.forkserver` says what it is for and how it is kept
safe): import once, then fork a child per job that becomes the job (its streams, working
directory, environment and arguments) and runs :func:`bnstudy.cli.main`; report each child's
exit status to its job.

    python -m bnstudy.forkserver.server NAME SNAKEMAKE_PID   # started by forkserver.start
"""

from __future__ import annotations

import hmac
import json
import os
import select
import signal
import socket
import struct
import sys
import threading
import time
import traceback

from bnstudy.forkserver import INT, PRELOAD, TOKEN, identity, recv_exact


def _log(msg: str) -> None:
    print(f"{time.strftime('%Y-%m-%d %H:%M:%S')} {msg}", flush=True)


def _preload() -> None:
    import importlib
    import pkgutil

    import bnstudy
    from bnstudy import lazy

    for name in PRELOAD:
        try:
            (lazy.module(name)._lazy_load() if name.split(".")[0] in ("matplotlib", "seaborn")
             else importlib.import_module(name))
        except Exception as e:  # noqa: BLE001 - a job that needs it imports it (and fails) itself
            _log(f"preload {name}: {type(e).__name__}: {e}")
    skip = {"bnstudy.__main__", "bnstudy.forkserver.server"}  # the verb runner, this server
    for mod in pkgutil.walk_packages(bnstudy.__path__, "bnstudy."):
        if mod.name not in skip:
            try:
                importlib.import_module(mod.name)
            except Exception as e:  # noqa: BLE001
                _log(f"preload {mod.name}: {type(e).__name__}: {e}")


def _request(conn: socket.socket, token: str) -> tuple[dict, list[int]] | str:
    """The job's request and standard streams, or why it is refused."""
    uid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                              struct.calcsize("3i")))[1]
    head, fds, _, _ = socket.recv_fds(conn, INT.size, 3)
    try:
        if len(head) < INT.size:
            head += recv_exact(conn, INT.size - len(head))
        req = json.loads(recv_exact(conn, INT.unpack(head)[0]))
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise
    ours = identity()
    why = ("another user" if uid != os.getuid() else
           "a wrong token" if not hmac.compare_digest(str(req.get("token")), token) else
           "another Python or package" if {k: req.get(k) for k in ours} != ours
           else "no standard streams" if len(fds) != 3 else None)
    if why:
        for fd in fds:
            os.close(fd)
        return why
    return req, fds


def _child(conn: socket.socket, req: dict, fds: list[int]) -> None:
    """Become the job: its streams, directory, environment and arguments; run the verb; exit."""
    code, done = 1, threading.Event()
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
        conn.sendall(b"P" + INT.pack(os.getpid()))
        threading.Thread(target=_end_with_job, args=(conn, done), daemon=True).start()
        code = _run(req["argv"])
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
    try:
        conn.sendall(b"S" + INT.pack(code))
    except OSError:
        pass
    os._exit(code)


def _run(argv: list[str]) -> int:
    from bnstudy.cli import main

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


def _accept(listener: socket.socket, token: str, children: dict, own: tuple[int, ...]) -> None:
    """Take one job: fork its child, or refuse it (the job then runs in its own process)."""
    try:
        conn, _ = listener.accept()
    except OSError as e:
        _log(f"accept: {e}")
        return
    try:
        conn.settimeout(10)
        got = _request(conn, token)
    except (OSError, EOFError, ValueError) as e:
        got = f"a bad request ({type(e).__name__}: {e})"
    if isinstance(got, str):
        _log(f"refused a job: {got}")
        try:
            conn.sendall(b"R")
        except OSError:
            pass
        conn.close()
        return
    req, fds = got
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for fd in (*own, listener.fileno(), *(c.fileno() for c, _ in children.values())):
            os.close(fd)
        conn.settimeout(None)
        _child(conn, req, fds)
    for fd in fds:
        os.close(fd)
    verb = req["argv"][0] if req["argv"] else "(no verb)"
    children[pid] = (conn, verb)
    _log(f"{verb} (pid {pid}) started")


def serve(name: str, parent: int) -> None:
    """Import, then serve jobs until the parent (Snakemake) is gone or sends SIGTERM."""
    token = os.environ.pop(TOKEN)
    _preload()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind("\0" + name)
    listener.listen(128)
    wake_r, wake_w = os.pipe()
    for fd in (wake_r, wake_w):
        os.set_blocking(fd, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    children: dict[int, tuple[socket.socket, str]] = {}
    _log(f"ready (pid {os.getpid()})")
    while os.getppid() == parent:
        ready, _, _ = select.select([listener, wake_r], [], [], 1.0)
        if wake_r in ready:
            while True:
                try:
                    os.read(wake_r, 512)
                except BlockingIOError:
                    break
        if listener in ready:
            _accept(listener, token, children, (wake_r, wake_w))
        while children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            conn, verb = children.pop(pid, (None, "?"))
            code = os.waitstatus_to_exitcode(status)
            _log(f"{verb} (pid {pid}): exit {code}")
            if conn is not None:
                try:  # the child's own report came first when it exited normally
                    conn.sendall(b"S" + INT.pack(code))
                except OSError:
                    pass
                conn.close()
    _log("Snakemake is gone: stopping")


if __name__ == "__main__":
    serve(sys.argv[1], int(sys.argv[2]))
