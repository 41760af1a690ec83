"""The fork server itself (:mod:`bnstudy.forkserver` says what it is for and how it is kept
safe): import once, then take requests (:mod:`bnstudy.forkserver.intake`) and fork a child per
job that becomes the job (:mod:`bnstudy.forkserver.child`); report each child's exit status to
its job.

    python -m bnstudy.forkserver.server DIRECTORY SNAKEMAKE_PID   # by forkserver.start
"""

from __future__ import annotations

import contextlib
import gc
import hmac
import os
import selectors
import signal
import socket
import stat
import sys
import time

from bnstudy.forkserver import (
    INT,
    PIDFILE,
    PRELOAD,
    REQUEST_DEADLINE,
    SOCKET,
    TOKEN,
    child,
    context,
    identity,
    intake,
)
from bnstudy.forkserver.child import log, send

FINISH_GRACE = 5.0  # s a stopped server waits for its children's exits (stop() waits 10)
MAX_PENDING = 64  # requests being read at once; more are refused (those jobs run themselves)


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
            log(f"preload {name}: {type(e).__name__}: {e}")
    skip = {"bnstudy.__main__", "bnstudy.forkserver.server"}  # the verb runner, this server
    for mod in pkgutil.walk_packages(bnstudy.__path__, "bnstudy."):
        if mod.name not in skip:
            try:
                importlib.import_module(mod.name)
            except Exception as e:  # noqa: BLE001
                log(f"preload {mod.name}: {type(e).__name__}: {e}")


def _freeze() -> int:
    """Move everything the imports made into the garbage collector's permanent generation; the
    count of objects frozen. A child's collections then pass over the preloaded heap (torch,
    pandas, matplotlib: some 400,000 objects) instead of walking it, and of writing to every
    page of it, which the fork shared and each such write copies (the purpose of
    ``gc.freeze``, a pre-fork server's): in the tiny study about 15% of its served jobs' CPU
    time (53.5 -> 45.7 CPU-s, the means of three runs each, alternated)."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()


class Server:
    """The listening socket, the requests being read, the children running (each with its
    job's connection) and a pipe that signals wake."""

    def __init__(self, directory: str, token: str) -> None:
        st = os.lstat(directory)
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
            raise SystemExit(f"{directory} is not a directory only this user can enter")
        self.path, self.token = os.path.join(directory, SOCKET), token
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        # bound and listening under another name, then renamed: a job that sees the socket
        # (forkserver.wait_until_listening) can connect to it
        staged = self.path + ".new"
        self.listener.bind(staged)
        os.chmod(staged, 0o600)
        self.listener.listen(128)
        os.rename(staged, self.path)
        self.listener.setblocking(False)
        self.wake_r, self.wake_w = os.pipe()
        for fd in (self.wake_r, self.wake_w):
            os.set_blocking(fd, False)
        self.selector = selectors.DefaultSelector()
        self.selector.register(self.listener, selectors.EVENT_READ)
        self.selector.register(self.wake_r, selectors.EVENT_READ)
        self.pending: dict[int, intake.Pending] = {}
        self.children: dict[int, tuple[socket.socket, str]] = {}

    def step(self, timeout: float) -> None:
        """Wait up to ``timeout`` seconds (less if a request's deadline comes first), then take
        what arrived: new connections, pieces of requests, ended children."""
        now = time.monotonic()
        if self.pending:
            timeout = min(timeout, max(min(p.deadline for p in self.pending.values()) - now, 0))
        for key, _ in self.selector.select(timeout):
            if key.fileobj is self.listener:
                self.accept()
            elif key.fileobj == self.wake_r:
                with contextlib.suppress(BlockingIOError):
                    while os.read(self.wake_r, 512):
                        pass
            else:
                self.read(key.fileobj)
        now = time.monotonic()
        for p in [p for p in self.pending.values() if p.deadline <= now]:
            self.refuse(p, f"no whole request within {REQUEST_DEADLINE:g} s")
        self.reap()

    def accept(self) -> None:
        """Every waiting connection: of another user, closed before a byte is read; of this
        user, its process's context is read and its request is read as it arrives."""
        while True:
            try:
                conn, _ = self.listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as e:  # out of file descriptors ...: the job runs itself
                log(f"accept: {e}")
                return
            try:
                pid, uid = intake.peer(conn)
                if uid != os.getuid():
                    raise intake.Refused(f"a connection of user id {uid}")
                if pid == 0:
                    raise intake.Refused("a process in another PID namespace")
                if len(self.pending) >= MAX_PENDING:
                    raise intake.Refused(f"more than {MAX_PENDING} requests at once")
                job = context.read(pid)
            except (intake.Refused, OSError, ValueError) as e:
                log(f"refused a job: {e}")
                conn.close()  # nothing read, nothing replied
                continue
            p = intake.Pending(conn, pid, job)
            self.pending[p.fileno()] = p
            self.selector.register(p, selectors.EVENT_READ)

    def read(self, p: intake.Pending) -> None:
        try:
            req = p.read()
            if req is None:
                return None
            own = context.read("self")
            why = intake.check(req, p.context, hmac.compare_digest(req["token"], self.token),
                               identity(), own)
        except intake.Refused as e:
            return self.refuse(p, str(e))
        except Exception as e:  # noqa: BLE001 - no request ends the server
            return self.refuse(p, f"a bad request ({type(e).__name__}: {e})")
        if why:
            return self.refuse(p, why)
        try:
            pid = self.fork(p, req, own)
        except OSError as e:
            return self.refuse(p, f"cannot fork ({e})")
        self.drop(p)
        verb = req["argv"][0] if req["argv"] else "(no verb)"
        self.children[pid] = (p.conn, verb)
        log(f"{verb} (pid {pid}) started")
        return None

    def drop(self, p: intake.Pending) -> None:
        self.selector.unregister(p)
        del self.pending[p.fileno()]

    def refuse(self, p: intake.Pending, why: str) -> None:
        log(f"refused a job: {why}")
        self.drop(p)
        with contextlib.suppress(OSError):
            p.conn.send(b"R")
        p.close()

    def fork(self, p: intake.Pending, req: dict, own: dict) -> int:
        """Fork the job's child (which never returns here); its pid."""
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # the child: never back into the server's code, whatever happens
            try:
                self.become(p, req, own)
            finally:
                os._exit(1)
        return pid

    def become(self, p: intake.Pending, req: dict, own: dict) -> None:
        """In the job's child: close the server's descriptors, then be the job."""
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)  # the server's stop handler is not the job's
        self.selector.close()
        os.close(self.wake_r)
        os.close(self.wake_w)
        for sock in (self.listener, *(c for c, _ in self.children.values())):
            sock.close()
        for other in self.pending.values():
            if other is not p:
                other.close()
        child.become(p.conn, req, p.context, own)

    def reap(self) -> None:
        while self.children:
            try:
                pid, status, usage = os.wait4(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            conn, verb = self.children.pop(pid, (None, "?"))
            code = os.waitstatus_to_exitcode(status)
            cpu = usage.ru_utime + usage.ru_stime  # the job's own CPU time, its children's too
            log(f"{verb} (pid {pid}): exit {code}, {cpu:.2f} CPU-s")
            if conn is not None:  # the child's own report came first when it exited normally
                send(conn, b"S" + INT.pack(code))
                conn.close()

    def finish(self, grace: float) -> None:
        """Reap the children still running, for up to ``grace`` seconds: a job whose child
        reported its status itself may end Snakemake's run (and send SIGTERM) before the child
        has exited, and its exit is logged here rather than lost."""
        deadline = time.monotonic() + grace
        while self.children and time.monotonic() < deadline:
            self.reap()
            if self.children:
                time.sleep(0.02)

    def close(self) -> None:
        for name in (self.path, os.path.join(os.path.dirname(self.path), PIDFILE)):
            with contextlib.suppress(OSError):
                os.unlink(name)
        with contextlib.suppress(OSError):
            os.rmdir(os.path.dirname(self.path))


def serve(directory: str, parent: int) -> None:
    """Import, then serve jobs until the parent (Snakemake) is gone or sends SIGTERM."""
    token = os.environ.pop(TOKEN)
    _preload()
    log(f"preloaded: {_freeze()} objects frozen out of the children's garbage collections")
    server = Server(directory, token)
    signal.set_wakeup_fd(server.wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    stopped: list[int] = []  # SIGTERM (forkserver.stop) ends the loop, not the process
    signal.signal(signal.SIGTERM, lambda signum, _: stopped.append(signum))
    log(f"ready (pid {os.getpid()})")
    try:
        while os.getppid() == parent and not stopped:
            server.step(1.0)
        log("stopping" if stopped else "Snakemake is gone: stopping")
        server.finish(FINISH_GRACE)
    finally:
        server.close()


if __name__ == "__main__":
    serve(sys.argv[1], int(sys.argv[2]))
