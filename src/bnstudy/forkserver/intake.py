"""Reading a job's request without letting any connection hold up the fork server
(:mod:`bnstudy.forkserver.server`): the peer's user is checked at accept, before a byte is read,
and its process context is read then (:mod:`bnstudy.forkserver.context`); the request is read
without blocking, a piece whenever it arrives, at most :data:`~bnstudy.forkserver.MAX_REQUEST`
bytes, all of it within :data:`~bnstudy.forkserver.REQUEST_DEADLINE` seconds of the accept,
then checked field by field. A connection that breaks any of these is refused and closed, and
never stops the server nor the other jobs' requests.

The request: a 4-byte length, then that many bytes of JSON (:func:`bnstudy.forkserver.delegate`).
The job's standard streams go to its child only, once the child is there
(:func:`bnstudy.forkserver.child.become`): the server never holds them, so a stalled server
cannot keep a job's pipes open.
"""

from __future__ import annotations

import json
import socket
import struct
import time

from bnstudy.forkserver import INT, MAX_REQUEST, REQUEST_DEADLINE, context

_CRED = struct.Struct("3i")  # struct ucred: pid, uid, gid
# the request's fields and their types (argv and env: lists and maps of strings)
FIELDS = {"token": str, "argv0": str, "argv": list, "cwd": str, "env": dict, "python": str,
          "package": str}


class Refused(Exception):
    """Why a connection is refused (the job runs in its own process)."""


def peer(conn: socket.socket) -> tuple[int, int]:
    """The connected process's (pid, uid), from the kernel (``SO_PEERCRED``)."""
    pid, uid, _ = _CRED.unpack(conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                               _CRED.size))
    return pid, uid


class Pending:
    """A connection whose request is being read: :meth:`read` when it is readable."""

    def __init__(self, conn: socket.socket, pid: int, job: dict) -> None:
        self.conn, self.pid, self.context = conn, pid, job
        self.deadline = time.monotonic() + REQUEST_DEADLINE
        self.head = bytearray(INT.size)
        self.body: bytearray | None = None
        self.got = 0  # bytes of the head, then of the body
        conn.setblocking(False)

    def fileno(self) -> int:
        return self.conn.fileno()

    def read(self) -> dict | None:
        """Read what has arrived: the request once it is all there, else None; Refused when the
        connection breaks a rule or closes."""
        try:
            if self.body is None:
                n = self.conn.recv_into(memoryview(self.head)[self.got:])
            else:
                n = self.conn.recv_into(memoryview(self.body)[self.got:])
        except (BlockingIOError, InterruptedError):
            return None
        if n == 0:
            raise Refused("the job closed the connection mid-request")
        self.got += n
        if self.body is None:
            if self.got < INT.size:
                return None
            size = INT.unpack(self.head)[0]
            if not 0 <= size <= MAX_REQUEST:
                raise Refused(f"a request of {size} bytes (at most {MAX_REQUEST})")
            self.body, self.got = bytearray(size), 0
        return parse(self.body) if self.got == len(self.body) else None

    def close(self) -> None:
        self.conn.close()


def parse(body: bytes) -> dict:
    """The request's JSON, checked field by field; Refused naming what is wrong."""
    try:
        req = json.loads(body)
    except (ValueError, RecursionError) as e:  # RecursionError: nested too deep
        raise Refused(f"not a JSON request ({type(e).__name__}: {str(e)[:200]})") from None
    if not isinstance(req, dict):
        raise Refused(f"a JSON {type(req).__name__} instead of an object")
    for key, kind in FIELDS.items():
        if not isinstance(req.get(key), kind):
            raise Refused(f"field {key!r} missing or not a {kind.__name__}")
    if not all(isinstance(a, str) for a in req["argv"]):
        raise Refused("field 'argv' holds something other than strings")
    if not all(isinstance(v, str) for v in req["env"].values()):
        raise Refused("field 'env' holds something other than strings")
    return req


def check(req: dict, job: dict, token_ok: bool, ours: dict, own: dict) -> str | None:
    """Why a complete request is refused, None if it is served: the token (``token_ok``), the
    same Python and package (``ours``: :func:`bnstudy.forkserver.identity`), and the context of
    the job's process (``job``, read at accept) against the server's (``own``,
    :func:`bnstudy.forkserver.context.mismatch`)."""
    if not token_ok:
        return "a wrong token"
    if {k: req[k] for k in ours} != ours:
        return "another Python or package"
    return context.mismatch(job, req["env"], own)
