"""A real single-node SLURM on loopback for the workflow tests, with two fake GPUs.

What it does (the workspace notes ../shared/notes/local-slurm.md say why each piece is there):

- installs ``slurmctld slurmd slurm-client munge`` with apt-get when they are missing (root
  only); when that is impossible the tests are *skipped* with the reason, never passed. Set
  ``BNSTUDY_REQUIRE_SLURM=1`` (CI) to turn such a skip into a failure;
- writes a private munge key, ``slurm.conf`` and ``gres.conf`` under a temporary directory
  (free ports on 127.0.0.1, one node with the machine's CPUs and memory, two fake GPUs whose
  device files are ``/dev/null`` and ``/dev/zero`` (so that two train jobs, each asking for a
  GPU, run side by side on a 2-CPU machine), job completion records in ``jobcomp.txt``,
  finished jobs kept in slurmctld for an hour so that ``squeue`` and ``scontrol`` report their
  state);
- starts munged, slurmctld and slurmd in the foreground as child processes and stops exactly
  those PIDs at teardown (after cancelling any job still queued);
- provides an ``srun`` wrapper that re-exports ``SLURM_CONF`` (the Snakemake jobstep plugin
  strips ``SLURM_*`` variables before its nested ``srun``), first on ``PATH``.

Nothing is written outside the temporary directory except by apt-get.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

PACKAGES = ("slurmctld", "slurmd", "slurm-client", "munge")
BINARIES = ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "scontrol", "sinfo", "srun",
            "scancel")
SBIN = ("/usr/sbin", "/usr/bin", "/sbin", "/bin")
FAKE_GPUS = ("/dev/null", "/dev/zero")  # device files standing for the node's GPUs


def _which(name: str) -> str | None:
    return shutil.which(name) or next(
        (f"{d}/{name}" for d in SBIN if os.access(f"{d}/{name}", os.X_OK)), None)


def missing_binaries() -> list[str]:
    return [b for b in BINARIES if _which(b) is None]


def install() -> tuple[float, str | None]:
    """Install SLURM and munge when missing: ``(seconds spent, reason it is unavailable)``."""
    if not missing_binaries():
        return 0.0, None
    if os.geteuid() != 0:
        return 0.0, f"SLURM is not installed ({missing_binaries()}) and the tests are not root"
    if shutil.which("apt-get") is None:
        return 0.0, f"SLURM is not installed ({missing_binaries()}) and there is no apt-get"
    t0 = time.perf_counter()
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for cmd in (["apt-get", "update"],
                ["apt-get", "install", "-y", "--no-install-recommends", *PACKAGES]):
        try:
            proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
        except (OSError, subprocess.TimeoutExpired) as e:
            return time.perf_counter() - t0, f"{' '.join(cmd)} could not run: {e}"
        if proc.returncode != 0:
            return time.perf_counter() - t0, (f"{' '.join(cmd)} failed ({proc.returncode}): "
                                              f"{(proc.stderr or proc.stdout)[-800:]}")
    missing = missing_binaries()
    return time.perf_counter() - t0, (f"installed {PACKAGES} but {missing} are still missing"
                                      if missing else None)


def _free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _memory_mb() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) // 1024
    raise RuntimeError("no MemTotal in /proc/meminfo")


@dataclass
class Cluster:
    root: Path
    conf: Path
    bin_dir: Path  # the srun wrapper; put first on PATH
    cpus: int
    memory_mb: int
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)
    install_seconds: float = 0.0
    start_seconds: float = 0.0
    setup_seconds: float = 0.0  # install + start, as the test fixture measured it

    @property
    def env(self) -> dict:
        return {**os.environ, "SLURM_CONF": str(self.conf),
                "PATH": f"{self.bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}

    def cmd(self, *args: str, timeout: float = 30) -> str:
        """Run a SLURM client command against this cluster; its stdout."""
        proc = subprocess.run([_which(args[0]), *args[1:]], env=self.env, capture_output=True,
                              text=True, timeout=timeout)
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(args)} failed: {proc.stderr.strip()}")
        return proc.stdout

    def jobs(self) -> list[dict]:
        """Every job slurmctld still remembers (MinJobAge: an hour), as key -> value dicts."""
        out = self.cmd("scontrol", "show", "job", "--oneliner")
        if "No jobs in the system" in out:
            return []
        return [_parse_oneliner(line) for line in out.splitlines() if line.strip()]

    def log(self, name: str) -> str:
        path = self.root / "log" / f"{name}.log"
        return path.read_text() if path.exists() else ""


def _parse_oneliner(line: str) -> dict:
    fields, key = {}, None
    for tok in line.split(" "):
        if "=" in tok and tok.split("=", 1)[0].isidentifier():
            key, value = tok.split("=", 1)
            fields[key] = value
        elif key is not None:  # a value with spaces (e.g. Comment=..., Command=...)
            fields[key] += " " + tok
    return {k: v.strip() for k, v in fields.items()}


def _write_config(root: Path, cpus: int, memory_mb: int) -> Path:
    ctld_port, d_port = _free_ports(2)
    for d in ("state/ctld", "state/d", "log", "munge", "bin"):
        (root / d).mkdir(parents=True, exist_ok=True)
    conf = root / "slurm.conf"
    conf.write_text("\n".join([
        "ClusterName=bnstudytest",
        "SlurmctldHost=localhost(127.0.0.1)",
        "SlurmUser=root",
        "SlurmdUser=root",
        "AuthType=auth/munge",
        f"AuthInfo=socket={root}/munge/munge.socket.2",
        "CredType=cred/munge",
        f"SlurmctldPort={ctld_port}",
        f"SlurmdPort={d_port}",
        f"StateSaveLocation={root}/state/ctld",
        f"SlurmdSpoolDir={root}/state/d",
        f"SlurmctldPidFile={root}/slurmctld.pid",
        f"SlurmdPidFile={root}/slurmd.pid",
        f"SlurmctldLogFile={root}/log/slurmctld.log",
        f"SlurmdLogFile={root}/log/slurmd.log",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "JobAcctGatherType=jobacct_gather/none",
        "AccountingStorageType=accounting_storage/none",
        "JobCompType=jobcomp/filetxt",
        f"JobCompLoc={root}/jobcomp.txt",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core_Memory",
        "MinJobAge=3600",  # finished jobs stay visible to squeue/scontrol for an hour
        "DefMemPerCPU=1000",
        "ReturnToService=2",
        "MpiDefault=none",
        "SchedulerParameters=sched_interval=2",
        "GresTypes=gpu",
        f"NodeName=localhost NodeAddr=127.0.0.1 CPUs={cpus} RealMemory={memory_mb} "
        f"Gres=gpu:{len(FAKE_GPUS)} State=UNKNOWN",
        "PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP",
        "",
    ]))
    # Fake GPUs: a device file each is required (``Count=1`` alone leaves the node INVAL).
    (root / "gres.conf").write_text("".join(f"NodeName=localhost Name=gpu File={f}\n"
                                            for f in FAKE_GPUS))
    srun = root / "bin" / "srun"
    srun.write_text(f'#!/bin/sh\nexport SLURM_CONF="{conf}"\nexec {_which("srun")} "$@"\n')
    srun.chmod(0o755)
    return conf


def _munge(root: Path) -> list[str]:
    m = root / "munge"
    key = m / "munge.key"
    key.write_bytes(os.urandom(1024))
    shutil.chown(m, "munge", "munge")
    shutil.chown(key, "munge", "munge")
    m.chmod(0o711)  # munged wants execute permission on the socket's directory for all
    key.chmod(0o600)
    return [_which("runuser") or "runuser", "-u", "munge", "--", _which("munged"), "--foreground",
            f"--socket={m}/munge.socket.2", f"--key-file={key}", f"--log-file={m}/munged.log",
            f"--pid-file={m}/munged.pid", f"--seed-file={m}/munged.seed"]


def start(root: Path, cpus: int | None = None, timeout: float = 60) -> Cluster:
    """Start munged, slurmctld and slurmd under ``root``; wait until the node is idle."""
    t0 = time.perf_counter()
    cpus = cpus or os.cpu_count() or 1
    memory = int(_memory_mb() * 0.9)
    conf = _write_config(root, cpus, memory)
    cluster = Cluster(root, conf, root / "bin", cpus, memory)
    commands = {
        "munged": _munge(root),
        "slurmctld": [_which("slurmctld"), "-D", "-f", str(conf)],
        "slurmd": [_which("slurmd"), "-D", "-N", "localhost", "-f", str(conf)],
    }
    try:
        for name, cmd in commands.items():
            with open(root / "log" / f"{name}.out", "w") as out:
                cluster.procs[name] = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT,
                                                       env=cluster.env, start_new_session=True)
            if name == "munged":
                _wait(lambda: (root / "munge" / "munge.socket.2").exists(), timeout, "munged",
                      cluster)
        _wait(lambda: _node_state(cluster) == "idle", timeout, "the node to become idle",
              cluster)
    except BaseException:
        stop(cluster)
        raise
    cluster.start_seconds = time.perf_counter() - t0
    return cluster


def _node_state(cluster: Cluster) -> str:
    try:
        return cluster.cmd("sinfo", "--noheader", "--format=%T", timeout=10).strip()
    except (RuntimeError, subprocess.TimeoutExpired):
        return ""


def _wait(ready, timeout: float, what: str, cluster: Cluster) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        for name, p in cluster.procs.items():
            if p.poll() is not None:
                raise RuntimeError(f"{name} exited ({p.returncode}) while waiting for {what}: "
                                   f"{(cluster.root / 'log' / f'{name}.out').read_text()[-800:]}"
                                   f"{cluster.log(name)[-1500:]}")
        if ready():
            return
        time.sleep(0.5)
    raise RuntimeError(f"timed out after {timeout}s waiting for {what}; slurmctld log:\n"
                       f"{cluster.log('slurmctld')[-1500:]}\nslurmd log:\n"
                       f"{cluster.log('slurmd')[-1500:]}")


def stop(cluster: Cluster, timeout: float = 20) -> None:
    """Cancel leftover jobs, then stop the daemons this fixture started, by PID, in reverse."""
    if "slurmctld" in cluster.procs and cluster.procs["slurmctld"].poll() is None:
        try:
            cluster.cmd("scancel", "--full", "--partition=debug", timeout=10)
            end = time.monotonic() + timeout
            while time.monotonic() < end and cluster.cmd("squeue", "--noheader",
                                                         "--states=RUNNING,PENDING,COMPLETING"):
                time.sleep(0.5)
        except (RuntimeError, subprocess.TimeoutExpired):
            pass
    for name in reversed(list(cluster.procs)):
        p = cluster.procs[name]
        if p.poll() is not None:
            continue
        # munged runs under runuser: signal the process group of this child only (same PID).
        os.killpg(p.pid, signal.SIGTERM)
        try:
            p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait(timeout=timeout)


@contextlib.contextmanager
def local_slurm():
    """A running single-node SLURM with two fake GPUs, stopped on exit.

    Skips the calling test (with the reason) when SLURM is missing and cannot be installed; with
    ``BNSTUDY_REQUIRE_SLURM=1`` that is a failure instead. Test modules wrap this in a fixture.
    """
    seconds, reason = install()
    if reason is None and os.geteuid() != 0:
        reason = "slurmd and munged (as user munge) must be started as root"
    if reason is None and importlib.util.find_spec("snakemake_executor_plugin_slurm") is None:
        reason = "snakemake-executor-plugin-slurm is not installed (pip install -e '.[dev]')"
    if reason is not None:
        if os.environ.get("BNSTUDY_REQUIRE_SLURM") == "1":
            pytest.fail(f"SLURM required (BNSTUDY_REQUIRE_SLURM=1) but unavailable: {reason}")
        pytest.skip(f"no local SLURM: {reason}")
    # Not under pytest's tmp_path: that is private to root (0700) and munged runs as "munge";
    # a short path also keeps the sockets under the AF_UNIX path length limit.
    root = Path(tempfile.mkdtemp(prefix="bnstudy-slurm-", dir="/tmp"))
    root.chmod(0o755)
    try:
        cluster = start(root)
        cluster.install_seconds = seconds
        try:
            yield cluster
        finally:
            stop(cluster)
    finally:
        shutil.rmtree(root, ignore_errors=True)
