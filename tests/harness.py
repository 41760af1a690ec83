"""The workflow tests' harness: the tiny study, project copies, Snakemake runs and their plans.

The tiny study is ``.test/config.yaml`` (small sections for the measures and every analysis of
``config/config.yaml``, on three small experiments), plus default options for any registered
measure it does not configure (:func:`tiny_config`); a test that needs other sizes derives its
config from it with :func:`tiny_config` overrides and says why.

A project copy (Snakefile, workflow/, config/, src/, .test/) lives in a temporary directory, so
tests may edit its modules (the workflow hashes ``<copy>/src/bnstudy`` for its ``code``
params), and Snakemake and its jobs import the copy's package (PYTHONPATH), a snapshot
unaffected by later edits of the working tree. The copy's ``config/config.yaml`` *is* the study
under test (results in ``<copy>/results``): a plain ``snakemake`` there runs it, and a
``--configfile`` replaces it whole (the Snakefile does not merge the two).
"""

from __future__ import annotations

import ast
import compileall
import contextlib
import fcntl
import functools
import json
import os
import py_compile
import re
import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pandas as pd
import warm_snakemake
import yaml

from bnstudy.tables import layout

REPO = Path(__file__).resolve().parents[1]
TEST_CONFIG = REPO / ".test" / "config.yaml"
COPIED = ("Snakefile", "workflow", "config", "src", "profiles", "environment.yml", ".test")
# Columns that legitimately differ between two runs of the same study.
VOLATILE_COLUMNS = ("wall_time", "seconds", "runtime", "duration", "time_s")


# -- configs -----------------------------------------------------------------------------------

def tiny_config(source: Path = REPO, **overrides) -> dict:
    """``.test/config.yaml`` (of ``source``), with a section of default options for every
    registered measure it does not configure (so a new measure runs through the workflow tests
    with no edit to the tiny study), and top-level sections replaced by ``overrides`` (a section
    given whole: ``plots={"dpi": 60, ...}``)."""
    from bnstudy import measures

    cfg = yaml.safe_load((source / ".test" / "config.yaml").read_text())
    for name in measures.REGISTRY:
        cfg.setdefault(name, {})
    cfg.update(overrides)
    return cfg


def with_steps(cfg: dict, steps: int, experiments=None) -> dict:
    """``cfg`` with the trainings of ``experiments`` (default: all) lasting ``steps`` SGD steps,
    their checkpoints at 0, 1 and ``steps // 2`` (for tests that kill a train job mid-run)."""
    names = {cfg["experiments"][e]["training"] for e in (experiments or cfg["experiments"])}
    for name in names:
        t = cfg["trainings"][name]
        t.update(steps=steps, eval_every=max(1, steps // 20), checkpoints=[0, 1, steps // 2])
    return cfg


def with_figures(cfg: dict, *families: str) -> dict:
    """``cfg`` drawing only the figure ``families`` (``plots.families``), for a test whose study
    needs a figures stage but not every family (the tiny study's own tests draw them all)."""
    cfg["plots"] = {**cfg.get("plots", {}), "families": list(families)}
    return cfg


def only_experiments(cfg: dict, *names: str) -> dict:
    """``cfg`` restricted to the experiments ``names`` (and the datasets, models and trainings
    they use)."""
    cfg["experiments"] = {e: cfg["experiments"][e] for e in names}
    for key, field in (("datasets", "dataset"), ("models", "model"), ("trainings", "training")):
        used = {x[field] for x in cfg["experiments"].values()}
        cfg[key] = {k: v for k, v in cfg[key].items() if k in used}
    return cfg


def write_config(path: Path, cfg: dict) -> Path:
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


# -- project copies ----------------------------------------------------------------------------

_SNAPSHOT: dict = {}


def check_error_line(tmp_path: Path, cfg: dict) -> str:
    """``python -m bnstudy check`` of ``cfg`` (written to ``tmp_path/c.yaml``, run there): it
    fails, and its message is one line, which is returned."""
    path = write_config(tmp_path / "c.yaml", cfg)
    proc = subprocess.run([sys.executable, "-m", "bnstudy", "check", str(path)], cwd=tmp_path,
                          capture_output=True, text=True, env=env(REPO), timeout=120)
    assert proc.returncode != 0, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    return lines[0]


def shared_dir(tmp_path_factory) -> Path:
    """The test session's temporary directory shared by all its processes: under pytest-xdist
    the workers' own directories are its subdirectories (``popen-gw0``, ...); run alone, the
    session's own one."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@contextlib.contextmanager
def locked(path: Path):
    """Hold an exclusive ``flock`` on ``path`` (created) for the block: one process of the
    session at a time (pytest-xdist workers) builds what the others then reuse."""
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def snapshot(tmp_path_factory) -> Path:
    """One copy of the working tree per test session (shared by its pytest-xdist workers):
    every project of the session is copied from it, so that runs compared with each other ran
    the same code even while the tree is being edited.

    Its package is compiled once, to bytecode checked against each module's source hash, and
    the projects copied from it keep that bytecode: otherwise every process of every copy (each
    Snakemake start, cluster job and job outside the fork server: hundreds in a session)
    compiles the modules it imports again, and writes nothing where ``PYTHONDONTWRITEBYTECODE``
    is set. A module a test edits no longer matches its hash, so Python compiles the edit."""
    if not _SNAPSHOT:
        root = shared_dir(tmp_path_factory)
        path, done = root / "snapshot", root / "snapshot.done"
        with locked(root / "snapshot.lock"):
            if not done.exists():
                shutil.rmtree(path, ignore_errors=True)
                _copy_tree(REPO, path)
                compileall.compile_dir(path / "src", quiet=1, workers=1,
                                       invalidation_mode=py_compile.PycInvalidationMode.CHECKED_HASH)
                done.touch()
        _SNAPSHOT["path"] = path
    return _SNAPSHOT["path"]


def _copy_tree(source: Path, dst: Path) -> Path:
    dst.mkdir(parents=True, exist_ok=True)
    # the snapshot's bytecode is hash-checked (above); the working tree's may be anything
    bytecode = () if source == _SNAPSHOT.get("path") else ("__pycache__", "*.pyc")
    ignore = shutil.ignore_patterns(*bytecode, "*.egg-info", "results")
    for name in COPIED:
        src = source / name
        if src.is_symlink():
            os.symlink(os.readlink(src), dst / name)
        elif src.is_dir():
            shutil.copytree(src, dst / name, ignore=ignore, symlinks=True)
        elif src.exists():
            shutil.copy2(src, dst / name)
    return dst


def copy_project(dst: Path, source: Path = REPO, config: dict | None = None) -> Path:
    """Copy the workflow (from ``source``: the repository or a :func:`snapshot`) into ``dst``,
    its config/config.yaml replaced by ``config`` (default: the tiny study), results in
    ``dst/results``."""
    _copy_tree(source, dst)
    cfg = dict(config or tiny_config(source))
    cfg["results"] = "results"
    write_config(dst / "config" / "config.yaml", cfg)
    return dst


# -- Snakemake ---------------------------------------------------------------------------------

def env(project: Path, extra_path: Path | None = None, extra_env: dict | None = None) -> dict:
    """The environment for Snakemake on ``project``: this interpreter's bin/ first on PATH (jobs
    call ``python``) and the copy's ``src`` first on PYTHONPATH, so that the workflow and its
    jobs run the copied package, unaffected by edits to the working tree during the test."""
    e = {**os.environ, **(extra_env or {})}
    e["PYTHONPATH"] = os.pathsep.join(
        [str(project / "src"), *filter(None, [os.environ.get("PYTHONPATH")])])
    paths = [str(Path(sys.executable).parent)]
    if extra_path is not None:
        paths.insert(0, str(extra_path))
    e["PATH"] = os.pathsep.join([*paths, e.get("PATH", "")])
    e.setdefault("OMP_NUM_THREADS", "1")
    return e


def snakemake(project: Path, *args: str, timeout: float = 900, extra_path=None,
              extra_env=None, check: bool = True, fresh: bool = False
              ) -> subprocess.CompletedProcess:
    """Run Snakemake in ``project``; raise with its output on failure when ``check``. It runs
    warm (:mod:`warm_snakemake`: forked from a process that has imported Snakemake), or, with
    ``fresh``, as a new ``python -m snakemake`` process (for a test of the interpreter's own
    start-up: a ``sitecustomize``, environment variables read at import)."""
    run_env = env(project, extra_path, extra_env)
    if not fresh:
        proc = warm_snakemake.run(list(args), project, run_env, timeout)
    else:
        proc = subprocess.run([sys.executable, "-m", "snakemake", *args], cwd=project,
                              env=run_env, capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"snakemake {' '.join(args)} failed ({proc.returncode}):\n"
                             f"{proc.stdout[-6000:]}\n{proc.stderr[-6000:]}")
    return proc


_RULE = re.compile(r"^(?:local)?(?:rule|checkpoint) (\w+):$")
_FIELD = re.compile(r"^(reason|wildcards|input|output|log|priority): (.*)$")


def planned_jobs(output: str) -> list[dict]:
    """The jobs a ``snakemake -n`` output lists: ``{"rule", "reason", "wildcards", "input",
    "output", "log"}`` each (files as lists), and ``"priority"`` (a one-item list) where
    Snakemake prints one (a nonzero priority: the train jobs')."""
    jobs = []
    for line in output.splitlines():
        line = line.strip()
        m = _RULE.match(line)
        if m:
            jobs.append({"rule": m.group(1), "reason": "", "wildcards": {}, "input": [],
                         "output": [], "log": []})
            continue
        m = _FIELD.match(line)
        if m and jobs:
            key, value = m.groups()
            if key == "reason":
                jobs[-1]["reason"] = value.strip()
            elif key == "wildcards":
                jobs[-1]["wildcards"] = dict(kv.split("=", 1) for kv in value.split(", "))
            else:
                jobs[-1][key] = value.split(", ")
    return [_train_job(j) for j in jobs]


def _train_job(job: dict) -> dict:
    """A train job (rule ``train_<experiment>_<norm>_s<seeds>``, one per block of seeds:
    bnstudy.planning.training) as rule ``train`` with the wildcards experiment, norm and block
    (its seeds' label), read from its per-seed outputs; its rule name kept as ``name``."""
    if not job["rule"].startswith("train_"):
        return job
    runs = [Path(f).parts[-4:-1] for f in job["output"] if f.endswith("checkpoints.pt")]
    ((experiment, norm),), seeds = {r[:2] for r in runs}, [int(r[2][4:]) for r in runs]
    return {**job, "rule": "train", "name": job["rule"],
            "wildcards": {"experiment": experiment, "norm": norm,
                          "block": layout.seeds_label(seeds)}}


def dry_run(project: Path, *args: str) -> list[dict]:
    """The jobs ``snakemake -n *args`` plans in ``project`` (the rule ``all`` left out)."""
    proc = snakemake(project, "-n", *args)
    return [j for j in planned_jobs(proc.stdout + proc.stderr) if j["rule"] != "all"]


def job_counts(jobs: list[dict]) -> Counter:
    """Rule -> number of jobs."""
    return Counter(j["rule"] for j in jobs)


def downstream(jobs: list[dict], start) -> list[dict]:
    """The jobs ``start(job)`` selects and every job that consumes their outputs, transitively
    (the DAG read from the input/output files of a dry run's job list)."""
    chosen = [j for j in jobs if start(j)]
    made = {f for j in chosen for f in j["output"]}
    rest = [j for j in jobs if not start(j)]
    grew = True
    while grew:
        grew = False
        for j in list(rest):
            if made.intersection(j["input"]):
                chosen.append(j)
                made.update(j["output"])
                rest.remove(j)
                grew = True
    return chosen


def job_keys(jobs: list[dict]) -> list[tuple]:
    """Sorted ``(rule, wildcards...)`` identities, for comparing two job lists."""
    return sorted((j["rule"], *sorted(j["wildcards"].items())) for j in jobs)


# -- tables ------------------------------------------------------------------------------------

def read_tables(results: Path) -> dict[str, pd.DataFrame]:
    """Every aggregated table, sorted, without columns that vary between identical runs."""
    out = {}
    for path in sorted((results / "tables").glob("*.parquet")):
        df = pd.read_parquet(path)
        df = df.drop(columns=[c for c in df.columns if c in VOLATILE_COLUMNS])
        keys = [c for c in df.columns if df[c].map(lambda v: isinstance(v, (str, int, float,
                                                                              bool))).all()]
        out[path.stem] = df.sort_values(keys).reset_index(drop=True) if keys else df
    return out


def assert_tables_equal(a: dict[str, pd.DataFrame], b: dict[str, pd.DataFrame]) -> None:
    assert sorted(a) == sorted(b), f"different tables: {sorted(a)} vs {sorted(b)}"
    for name in a:
        pd.testing.assert_frame_equal(a[name], b[name], check_exact=True, obj=f"table {name}")


# -- the tiny study, run once per session ------------------------------------------------------

_LOCAL: dict = {}


def local_study(tmp_path_factory) -> dict:
    """The tiny study run to completion locally: run once per test session (by whichever
    pytest-xdist worker asks first, the others waiting for it), and each call given its own
    copy of the finished project (:func:`copy_study`), so that tests may edit its code or
    configs, or write more results, without touching another module's (workflow, rerun and
    report tests share it: test modules wrap this in their own fixture). ``{"project",
    "results"}``: the copy; ``"ran_in"``: the project the run itself ran in, left as it ended;
    ``"seconds"``: the run's wall time."""
    if not _LOCAL:
        root = shared_dir(tmp_path_factory)
        built, done, failed = root / "local" / "project", root / "local.json", root / "local.failed"
        with locked(root / "local.lock"):
            if failed.exists():
                raise AssertionError(f"the tiny study's run failed:\n{failed.read_text()}")
            if not done.exists():
                shutil.rmtree(built.parent, ignore_errors=True)
                copy_project(built, source=snapshot(tmp_path_factory))
                t0 = time.perf_counter()
                try:
                    snakemake(built, "--cores", "2")
                except BaseException as e:
                    failed.write_text(str(e))
                    raise
                done.write_text(json.dumps({"seconds": time.perf_counter() - t0}))
        _LOCAL.update(ran_in=built, seconds=json.loads(done.read_text())["seconds"])
    project = copy_study(_LOCAL["ran_in"], tmp_path_factory.mktemp("local") / "project")
    return {**_LOCAL, "project": project, "results": project / "results"}


def copy_study(project: Path, dst: Path) -> Path:
    """A copy of a project with a finished run, as if the run had been made there: its results,
    Snakemake's metadata and their file times copied (nothing to do in the copy either), the
    project's path in the records that hold it (Snakemake's metadata of the report, whose inputs
    include the paper configs by absolute path; the results' study record,
    bnstudy.planning.lock) replaced by the copy's. Cheaper than running the study again."""
    shutil.copytree(project, dst, symlinks=True)
    old, new = str(project.resolve()).encode(), str(dst.resolve()).encode()
    records = [*(dst / ".snakemake" / "metadata").iterdir(),
               *(dst / "results").glob(".bnstudy-study.*")]
    for record in records:
        data = record.read_bytes()
        if old in data:
            st = record.stat()
            record.write_bytes(data.replace(old, new))
            os.utime(record, ns=(st.st_atime_ns, st.st_mtime_ns))
    return dst


def imported_modules(entries, src: Path) -> set[str]:
    """``entries`` (paths relative to the package dir ``src``) and every package module they
    import, transitively -- the test's own reading of the imports, to cross-check the workflow's
    code hashes (bnstudy.planning.codeversion)."""

    def resolve(parts):
        for cand in (f"{'/'.join(parts)}.py", "/".join([*parts, "__init__.py"])):
            if parts and (src / cand).is_file():
                return cand
        return "__init__.py" if not parts else None

    todo, seen = list(entries), set()
    while todo:
        rel = todo.pop()
        if rel in seen or rel is None:
            continue
        seen.add(rel)
        for name, base in _package_imports(rel, (src / rel).read_bytes()):
            todo.append(resolve(name) if base is None else resolve(name) or resolve(base))
    return seen


@functools.lru_cache(maxsize=4096)
def _package_imports(rel: str, text: bytes) -> tuple:
    """What module ``rel`` of the package, whose source is ``text``, imports from the package:
    ``(parts, None)`` for ``import bnstudy.<parts>``, ``(base + [name], base)`` for ``from
    <base> import name`` (a module, else a name in ``base``). Parsed once per source: a test
    that edits a module gets its new imports."""
    here, out = list(Path(rel).parent.parts), []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = [*here[: len(here) - node.level + 1],
                    *filter(None, (node.module or "").split("."))]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("bnstudy"):
            base = node.module.split(".")[1:]
        elif isinstance(node, ast.Import):
            out.extend((tuple(a.name.split(".")[1:]), None) for a in node.names
                       if a.name.split(".")[0] == "bnstudy")
            continue
        else:
            continue
        out.extend(((*base, a.name), tuple(base)) for a in node.names)
    return tuple(out)
