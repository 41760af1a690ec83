"""Snakemake for the tests, started warm: each run is a child forked from a process that has
already imported Snakemake and its dependencies (a :mod:`multiprocessing` fork server per test
process), instead of a fresh ``python -m snakemake``.

A fresh Snakemake spends about 2 of its 3 CPU-s of a dry run on imports (Snakemake, its
persistence's SQLAlchemy, the SLURM plugin's pandas, argparse, jinja2, docutils, ...), and the
tests start Snakemake some 150 times. The child is set up as ``python -m snakemake`` would run
in the test's project: the working directory, the whole environment (``os.environ``, which the
jobs inherit), ``sys.path`` as a fresh interpreter builds it from that environment's
``PYTHONPATH`` (so the Snakefile imports the project copy's package, never one imported before
the fork: the server imports no ``bnstudy`` module), ``sys.argv``, standard output and error
into files, and the temporary directory. At the end it does what an interpreter's exit does
(Snakemake's threads are joined, ``atexit`` handlers and logging flushed) and exits with
Snakemake's status. Jobs are still fresh processes of Snakemake's.

What a forked child cannot do is run the interpreter's start-up again: a ``sitecustomize``, a
``-X`` option or an environment variable read at import (``PYTHONHASHSEED``, ...) takes effect
in a fresh process only. A test that needs them passes ``fresh=True`` to
:func:`harness.snakemake`.
"""

from __future__ import annotations

import json
import locale
import multiprocessing
import os
import subprocess
import sys
import tempfile

# What a dry run of the workflow imports besides the project's package (measured with
# ``python -X importtime -m snakemake -n``); a module that fails to import is skipped.
PRELOAD = (
    "snakemake.cli", "snakemake.api", "snakemake.workflow", "snakemake.dag", "snakemake.jobs",
    "snakemake.persistence", "snakemake.scheduling.job_scheduler", "snakemake.report",
    "snakemake.executors.local", "snakemake.executors.dryrun", "snakemake.executors.touch",
    "snakemake.report.html_reporter", "snakemake.storage", "snakemake.profiles",
    "snakemake.assets", "graphlib",
    "snakemake_executor_plugin_slurm", "snakemake_executor_plugin_slurm_jobstep",
    "pandas", "numpy", "yaml", "jsonschema", "jinja2", "docutils.core", "pygments",
    "requests", "smart_open", "yte", "dpath", "platformdirs", "argparse_dataclass",
    "PIL.Image", "packaging.version",
)
_context = None
_base_path: list[str] | None = None
# CPU seconds of this process's warm runs, their jobs included (those a run waited for): what
# a fresh run's ``RUSAGE_CHILDREN`` would count in the test process, for the benchmarks
cpu_seconds = 0.0


def _fresh_path() -> list[str]:
    """``sys.path`` of a fresh interpreter without PYTHONPATH, its script directory left out."""
    global _base_path
    if _base_path is None:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        code = "import sys, json; print(json.dumps(sys.path))"
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                             text=True, check=True).stdout
        _base_path = json.loads(out)[1:]
    return _base_path


def _ctx():
    global _context
    if _context is None:
        _context = multiprocessing.get_context("forkserver")
        _context.set_forkserver_preload(list(PRELOAD))
    return _context


def _child(args: list[str], cwd: str, env: dict, files: str, base: list[str]) -> None:
    """In the forked child: become ``python -m snakemake *args`` in ``cwd`` and run it, its
    standard output and error into ``files``/stdout and stderr, its CPU seconds into cpu."""
    import atexit
    import logging
    import threading
    import traceback

    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    tempfile.tempdir = None  # TMPDIR and the like, read again from the environment
    sys.path[:] = [cwd, *filter(None, env.get("PYTHONPATH", "").split(os.pathsep)), *base]
    sys.path_importer_cache.clear()
    import importlib.util

    sys.argv = [importlib.util.find_spec("snakemake.__main__").origin, *args]  # as -m sets it
    for fd, name in ((1, "stdout"), (2, "stderr")):
        f = os.open(os.path.join(files, name), os.O_WRONLY | os.O_TRUNC)
        os.dup2(f, fd)
        os.close(f)
    code = 0
    try:
        from snakemake.cli import main

        main(list(args))
    except SystemExit as e:
        if e.code is None or isinstance(e.code, int):
            code = e.code or 0
        else:
            print(e.code, file=sys.stderr)
            code = 1
    except BaseException:
        traceback.print_exc()
        code = 1
    # what the interpreter's exit does: threads joined, atexit handlers, streams flushed
    threading._shutdown()
    atexit._run_exitfuncs()
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    import resource

    used = [resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
    with open(os.path.join(files, "cpu"), "w") as f:
        f.write(str(sum(u.ru_utime + u.ru_stime for u in used)))
    os._exit(code)


def run(args: list[str], cwd, env: dict, timeout: float | None) -> subprocess.CompletedProcess:
    """``python -m snakemake *args`` in ``cwd`` with environment ``env`` and ``timeout``
    seconds, as :func:`subprocess.run` with ``capture_output=True, text=True`` returns it."""
    global cpu_seconds
    cmd = [sys.executable, "-m", "snakemake", *args]
    with tempfile.TemporaryDirectory(prefix="snakemake-run-") as tmp:
        out, err = os.path.join(tmp, "stdout"), os.path.join(tmp, "stderr")
        for path in (out, err):
            open(path, "wb").close()
        proc = _ctx().Process(target=_child, args=(list(args), str(cwd), dict(env), tmp,
                                                   _fresh_path()))
        proc.start()
        proc.join(timeout)
        timed_out = proc.exitcode is None
        if timed_out:
            proc.kill()
            proc.join()
        encoding = locale.getpreferredencoding(False)
        stdout, stderr = (open(p, encoding=encoding, errors="replace").read() for p in (out, err))
        try:
            with open(os.path.join(tmp, "cpu")) as f:
                cpu_seconds += float(f.read())
        except (OSError, ValueError):  # killed before it wrote it
            pass
    code = proc.exitcode
    proc.close()
    if timed_out:
        raise subprocess.TimeoutExpired(cmd, timeout, stdout, stderr)
    return subprocess.CompletedProcess(cmd, code, stdout, stderr)
