"""A job's process context, read by the fork server from the kernel (``/proc/PID``, ``prlimit``)
for the process that connected, never from what it sends: a served job runs in its own
process's context or not at all.

- What a forked child cannot take on is compared with the server's own, and a difference refuses
  the job (it runs in its own process): namespaces (mount, PID, network, user ...), root
  directory, cgroup, credentials (user and group ids, supplementary groups, capabilities,
  no-new-privileges, seccomp), security label, and the environment variables that decide which
  programs and libraries run (:data:`EXEC_ENV`: ``PATH`` for ``git`` ...), so a served job
  resolves programs as the server does, which is as its own process would.
- What a child can take on it takes (:func:`apply`): resource limits (``ulimit``), umask, nice
  value, CPU affinity and which of the signals a job hands on (:data:`SIGNALS`) its process
  ignores (``SigIgn``: a process started with SIGINT ignored, as ``system()`` and ``nohup``
  start them, keeps ignoring it; the others get Python's own dispositions, whatever the server
  was started with). Limits above the server's hard limits, a nice value below the server's
  or CPUs outside its affinity would need privileges: refused as well.
"""

from __future__ import annotations

import os
import resource
import signal

from bnstudy.forkserver import FORWARDED as SIGNALS  # what a job hands on to its child

NAMESPACES = ("mnt", "pid", "net", "ipc", "uts", "user", "cgroup", "time")
CREDENTIALS = ("Uid", "Gid", "Groups", "CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb",
               "NoNewPrivs", "Seccomp", "Seccomp_filters")
# the environment variables that decide which program or library a process (git ...) runs
EXEC_ENV = ("PATH", "LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT", "PYTHONPATH", "PYTHONHOME",
            "GIT_EXEC_PATH")
RLIMITS = {getattr(resource, n): n for n in sorted(dir(resource), reverse=True)
           if n.startswith("RLIMIT_")}  # RLIMIT_OFILE is RLIMIT_NOFILE: NOFILE's name wins
INFINITY = resource.RLIM_INFINITY


def _file_id(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except FileNotFoundError:  # a namespace kind this kernel does not have
        return None
    return st.st_dev, st.st_ino


def _label(pid: int | str) -> str | None:
    try:
        with open(f"/proc/{pid}/attr/current") as f:
            return f.read().strip("\0\n")
    except OSError:  # no security module that labels processes
        return None


def read(pid: int | str) -> dict:
    """The context of process ``pid`` ("self": this process's); OSError when it cannot be read
    (a process gone, one of another user)."""
    with open(f"/proc/{pid}/status") as f:
        status = dict(line.rstrip("\n").split(":", 1) for line in f if ":" in line)
    if "Umask" not in status:
        raise OSError(f"/proc/{pid}/status has no Umask (Linux 4.7 or later has it)")
    with open(f"/proc/{pid}/cgroup") as f:
        cgroup = f.read()
    target = 0 if pid == "self" else int(pid)
    ignored = int(status["SigIgn"], 16)  # bit s - 1: signal s ignored
    return {
        "namespaces": {n: _file_id(f"/proc/{pid}/ns/{n}") for n in NAMESPACES},
        "root": _file_id(f"/proc/{pid}/root"),
        "cgroup": cgroup,
        "credentials": {k: status.get(k, "").split() for k in CREDENTIALS},
        "label": _label(pid),
        "rlimits": {r: resource.prlimit(target, r) for r in RLIMITS},
        "umask": int(status["Umask"].strip(), 8),
        "nice": os.getpriority(os.PRIO_PROCESS, target),
        "affinity": os.sched_getaffinity(target),
        "ignored": frozenset(s for s in SIGNALS if ignored >> (s - 1) & 1),
    }


def _within(limit: int, bound: int) -> bool:
    return bound == INFINITY or (limit != INFINITY and limit <= bound)


def mismatch(job: dict, env: dict, own: dict) -> str | None:
    """Why a job of context ``job`` and environment ``env`` cannot run in a child of a server of
    context ``own`` (in its environment, ``os.environ``); None when it can."""
    for n in NAMESPACES:
        if job["namespaces"][n] != own["namespaces"][n]:
            return f"its process is in another {n} namespace"
    for key, what in (("root", "root directory"), ("cgroup", "cgroup"),
                      ("label", "security label")):
        if job[key] != own[key]:
            return f"its process has another {what}"
    for k in CREDENTIALS:
        if job["credentials"][k] != own["credentials"][k]:
            return f"its process has other credentials ({k})"
    for k in EXEC_ENV:
        if env.get(k) != os.environ.get(k):
            return f"its {k} is not the server's"
    for r, name in RLIMITS.items():
        if not _within(job["rlimits"][r][1], own["rlimits"][r][1]):
            return f"its hard {name} is above the server's"
    if job["nice"] < own["nice"]:
        return f"its nice value {job['nice']} is below the server's {own['nice']}"
    if not job["affinity"] <= own["affinity"]:
        return "its CPU affinity has CPUs the server's has not"
    return None


def apply(job: dict, own: dict) -> None:
    """Give this process (a freshly forked child, one thread) the job's limits, umask, nice value,
    CPU affinity and ignored signals (of :data:`SIGNALS`; the rest as a new Python process has
    them: SIGINT raising KeyboardInterrupt, the others their default)."""
    for s in SIGNALS:
        signal.signal(s, signal.SIG_IGN if s in job["ignored"] else
                      signal.default_int_handler if s == signal.SIGINT else signal.SIG_DFL)
    os.umask(job["umask"])
    if job["nice"] != own["nice"]:
        os.setpriority(os.PRIO_PROCESS, 0, job["nice"])
    if job["affinity"] != own["affinity"]:
        os.sched_setaffinity(0, job["affinity"])
    for r in RLIMITS:
        if job["rlimits"][r] != own["rlimits"][r]:
            resource.setrlimit(r, job["rlimits"][r])
