"""Safety of the workflow's commands: hostile or odd ``results`` paths, huge grids, retries and
rebuilding a deleted intermediate file.

Every path reaches the shell quoted (``{...:q}`` in every rule), so a results path such as
``r$(touch PWNED)`` is a directory name, never a command; a results path is normalised once
(``out/`` is ``out``), so a trailing slash or ``./`` cannot split the DAG. The dry runs check
every command of the tiny study word by word (``shlex``); the real runs prove that nothing was
executed (a dry run cannot), with one job whose command carries the path.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path

import harness
import pandas as pd
import pytest
import yaml
from harness import snakemake

from bnstudy import io
from bnstudy.cli import main as cli
from bnstudy.tables import layout

pytestmark = pytest.mark.workflow

MARK = "PWNED"
# (results as given, where the outputs must land). The first three would run `touch PWNED` if a
# command pasted them unquoted; the last two broke the DAG (MissingInputException in rule all).
RESULTS = [
    pytest.param("r$(touch PWNED)", "r$(touch PWNED)", id="command-substitution"),
    pytest.param("a;touch PWNED;b", "a;touch PWNED;b", id="semicolons"),
    pytest.param("q'`touch PWNED`\"x", "q'`touch PWNED`\"x", id="quotes-backticks"),
    pytest.param("with space/", "with space", id="space-and-trailing-slash"),
    pytest.param("./out//sub/", "out/sub", id="dot-and-double-slash"),
]
# The shell operators a command may contain: its log redirection (`> log 2>&1`).
REDIRECTION = {">", ">&"}


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    """The tiny study, its results directory relative to the project."""
    return harness.copy_project(tmp_path_factory.mktemp("safety") / "project",
                                source=harness.snapshot(tmp_path_factory))


def _marks(root: Path) -> list[Path]:
    """Files named like the marker anywhere under ``root`` (a directory may contain the text)."""
    return [p for p in root.rglob(MARK) if p.name == MARK]


def _commands(output: str) -> list[str]:
    return [line.split("Shell command: ", 1)[1] for line in output.splitlines()
            if line.startswith("Shell command: ") and line != "Shell command: None"]


def _words(command: str) -> list[str]:
    lex = shlex.shlex(command, posix=True, punctuation_chars=True)
    lex.whitespace_split = True
    return list(lex)


@pytest.mark.parametrize("given, expected", RESULTS)
def test_every_command_keeps_the_results_path_one_word(project, given, expected):
    proc = snakemake(project, "-n", "-p", "--forceall", "--config", f"results={given}")
    commands = _commands(proc.stdout + proc.stderr)
    planned = [j for j in harness.planned_jobs(proc.stdout) if j["rule"] != "all"]
    # job_arguments writes its argument file in Python (no shell command to check); its output
    # path is checked below with every other job's
    jobs = [j for j in planned if j["rule"] != "job_arguments"]
    assert len(commands) == len(jobs)  # one command per job: every rule's command is checked
    assert {c.split()[3] for c in commands} >= {"train", "measure", "aggregate", "plot",
                                                "report", "claims", "prepare-data"}
    for command in commands:
        words = _words(command)
        assert set(w for w in words if not w.strip("<>&|;()")) <= REDIRECTION, command
        # not the report's config (JSON); "@FILE" names an argument file (one word)
        paths = [w.split("=", 1)[-1].removeprefix("@") for w in words
                 if expected in w and not w.startswith("{")]
        assert paths, command  # every command writes under the results directory
        for path in paths:  # the path is one word, under the normalised directory
            assert path == expected or path.startswith(expected + "/"), (path, command)
        if MARK in given:  # every word that carries the marker carries the whole path
            assert all(expected in w for w in words if MARK in w and not w.startswith("{")), \
                command
    assert len(planned) > len(jobs)  # the argument files are planned too
    for job in planned:
        for f in job["output"]:
            assert f.startswith(expected + "/"), f


@pytest.mark.parametrize("given, expected", RESULTS)
def test_a_job_runs_with_the_path_as_a_name_not_a_command(project, given, expected):
    target = f"{expected}/data/star2d.npz"
    snakemake(project, "--cores", "1", target, "--config", f"results={given}")
    assert (project / target).is_file()
    assert (project / expected / "logs" / "prepare_data" / "star2d.log").is_file()
    assert not _marks(project.parent)


def test_aggregation_runs_with_a_hostile_path(project):
    """Training, a measure job (its runs' grid and its table paths on the command line) and
    the aggregate verb (the grid on its command line) under a hostile path."""
    results = "x;touch PWNED;`touch PWNED`$(touch PWNED) y/"
    norm = os.path.normpath(results)
    snakemake(project, "--cores", "2", f"{norm}/tables/training.parquet",
              f"{norm}/runs/dln/seeds0/generalization.parquet", "--config", f"results={results}")
    df = pd.read_parquet(project / norm / "tables" / "training.parquet")
    assert sorted(set(df["norm"])) == ["batchnorm", "none"]
    assert (project / norm / "logs" / "aggregate" / "training.log").is_file()
    ge = pd.read_parquet(project / norm / "runs" / "dln" / "seeds0" / "generalization.parquet")
    assert ge[["experiment", "norm", "seed"]].values.tolist() == [["dln", "batchnorm", 0]]
    assert (project / norm / "logs" / "generalization" / "dln" / "seeds0.log").is_file()
    assert not _marks(project.parent)


@pytest.mark.parametrize("given", ["", "-results", "a\nb", "out{x}"])
def test_results_that_cannot_be_a_path_are_refused_before_any_job(project, given):
    cfg_path = project / "bad.yaml"
    cfg = yaml.safe_load((project / "config" / "config.yaml").read_text())
    cfg["results"] = given
    cfg_path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    proc = snakemake(project, "-n", "--configfile", str(cfg_path), check=False)
    text = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "results" in text and "without control characters or braces" in text, text[-3000:]
    assert "Traceback" not in text and not (project / "results").exists()


def test_logs_live_under_each_studys_results(project):
    """Two studies in one checkout keep their own logs."""
    plans = {}
    for results in ("study_a", "study_b"):
        proc = snakemake(project, "-n", "--forceall", "--config", f"results={results}")
        logs = [line.split("log: ", 1)[1] for line in proc.stdout.splitlines()
                if line.strip().startswith("log: ")]
        assert logs and all(p.startswith(f"{results}/logs/") for p in logs), logs[:5]
        plans[results] = logs
    assert not set(plans["study_a"]) & set(plans["study_b"])


# -- aggregation of thousands of runs ----------------------------------------------------------

def test_aggregate_verb_reads_thousands_of_runs_from_the_grid(tmp_path):
    grid = {"e1": {"norms": ["none", "batchnorm"], "seeds": list(range(700))},
            "e2": {"norms": ["layernorm"], "seeds": list(range(600))}}
    files = layout.grid_files(tmp_path, grid, "t.parquet")
    assert len(files) == 2000
    # (one provenance record, each file's own hash and place added: a record asks git twice)
    prov = io.provenance("0" * 16, "cpu")
    for f in files:
        e, n, s = Path(f).parts[-4:-1]
        io.write_table(pd.DataFrame({"experiment": [e], "norm": [n], "seed": [int(s[4:])],
                                     "value": [1.0]}), f, {
                           **prov, "config_hash": f,
                           "place": {"experiment": e, "norm": n, "seed": int(s[4:])}})
    argv = ["aggregate", "--results", str(tmp_path), "--name", "t.parquet",
            "--grid", json.dumps(grid), "--out", str(tmp_path / "t.parquet")]
    assert len(" ".join(argv)) < 12_000  # the file list itself: over 128 KiB
    assert len(" ".join(files)) > 128 * 1024
    assert cli.main(argv) == 0
    df = pd.read_parquet(tmp_path / "t.parquet")
    assert len(df) == 2000 and io.read_provenance(tmp_path / "t.parquet")["inputs"] == 2000
    os.remove(files[1234])
    assert cli.main(argv) == 2  # a missing run's file is an error naming it, not a gap


@pytest.mark.parametrize("grid, name, message", [
    ({}, "t.parquet", "non-empty mapping"),
    ({"e": {"norms": [], "seeds": [0]}}, "t.parquet", "non-empty lists"),
    ({"e": {"norms": ["none"]}}, "t.parquet", "'norms'"),
    ({"e": {"norms": ["none"], "seeds": [0]}}, "../t.parquet", "plain file name"),
    # each block's normalizers: one non-empty list per block, of the experiment's normalizers
    ({"e": {"norms": ["none"], "seeds": [0, 1], "blocks": [[0], [1]],
            "block_norms": [["none"]]}}, "t.parquet", "block_norms"),
    ({"e": {"norms": ["none"], "seeds": [0, 1], "blocks": [[0], [1]],
            "block_norms": [["none"], ["batchnorm"]]}}, "t.parquet", "block_norms"),
    ({"e": {"norms": ["none"], "seeds": [0], "block_norms": [["none"]]}}, "t.parquet",
     "block_norms"),
])
def test_grid_files_rejects_a_bad_grid(grid, name, message):
    with pytest.raises(ValueError, match=message):
        layout.grid_files("results", grid, name)


def test_a_grid_of_a_thousand_runs_keeps_the_commands_small(project):
    """The aggregate job of 1000 runs and the measure job of their experiment name the runs by
    their grid, not their files: under a results directory with a long name (as a cluster's
    scratch paths are), a list of their files would be over Linux's 128 KiB limit on one
    argument. (A longer name, not more runs: Snakemake's DAG of 3000 runs took 40 CPU-s.)"""
    cfg = harness.only_experiments(yaml.safe_load(
        (project / "config" / "config.yaml").read_text()), "star")
    results = "results/" + "a_results_directory_with_a_long_name_" * 3 + "x" * 10
    cfg["results"] = results
    cfg["experiments"]["star"].update(seeds=list(range(500)), measures=["generalization"])
    cfg["limits"] = {**cfg.get("limits", {}), "seeds": 500}  # the default cap is 256 seeds
    cfg_path = project / "big.yaml"
    harness.write_config(cfg_path, cfg)
    proc = snakemake(project, "-n", "-p", f"{results}/tables/training.parquet",
                     f"{results}/runs/star/seeds0-499/generalization.parquet", "--configfile",
                     str(cfg_path))
    for verb, name in (("aggregate", "history.parquet"), ("measure", "checkpoints.pt")):
        commands = [c for c in _commands(proc.stdout) if f" {verb} " in c]
        assert len(commands) == 1, verb
        assert len(commands[0]) < 20_000, len(commands[0])  # 1000 runs; a file list: 165 KB
        words = _words(commands[0])
        if verb == "aggregate":  # its grid is in its argument file (@FILE), not on the line
            assert "--grid" not in words
            at = next(w[1:] for w in words if w.startswith("@"))
            snakemake(project, "--cores", "1", at, "--configfile", str(cfg_path))
            words = (project / at).read_text().splitlines()
        grid = json.loads(words[words.index("--grid") + 1])
        files = layout.grid_files(results, grid, name)
        assert len(files) == 1000 and len(" ".join(files)) > 128 * 1024, len(" ".join(files))


# -- retries and rebuilding ------------------------------------------------------------------

FLAKY_PYTHON = """#!/bin/sh
# fails the first prepare-data job once, as a killed job would; then the real interpreter
if [ "$3" = "prepare-data" ] && [ ! -e "$FLAKY_MARK" ]; then touch "$FLAKY_MARK"; exit 9; fi
exec {python} "$@"
"""


@pytest.mark.parametrize("profile_retries", [True, False])
def test_the_default_profile_retries_a_failed_job(project, tmp_path, profile_retries):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python").write_text(FLAKY_PYTHON.format(python=sys.executable))
    (bin_dir / "python").chmod(0o755)
    results = f"retry_{profile_retries}"
    args = ["--cores", "1", f"{results}/data/star2d.npz", "--config", f"results={results}"]
    if not profile_retries:
        args += ["--retries", "0"]
    proc = snakemake(project, *args, extra_path=bin_dir, check=False,
                     extra_env={"FLAKY_MARK": str(tmp_path / "failed_once")})
    assert (tmp_path / "failed_once").is_file()  # the job did fail once
    assert (proc.returncode == 0) == profile_retries, proc.stderr[-3000:]
    assert (project / results / "data" / "star2d.npz").is_file() == profile_retries
    # one job to run: no fork server started for it (its imports would cost more than they save)
    log = (project / results / "logs" / "forkserver.log").read_text()
    assert "no fork server: 1 of the run's 1 jobs would be served" in log, log


def test_a_deleted_intermediate_file_is_rebuilt_by_the_documented_commands(project):
    """Snakemake 9 sees nothing to do when an intermediate file is gone but what it feeds is up
    to date; docs/reruns.md, "Rebuilding a deleted file": find it with --summary, build it by
    name, then the ordinary run redoes what depends on it."""
    table = "rebuild/tables/training.parquet"
    run = "rebuild/runs/star/none/seed0/history.parquet"
    args = ["--config", "results=rebuild"]
    snakemake(project, "--cores", "2", table, *args)
    (project / run).unlink()
    proc = snakemake(project, "-n", table, *args)
    assert "Nothing to be done" in proc.stdout + proc.stderr
    summary = snakemake(project, "--summary", table, *args).stdout
    missing = [line.split("\t")[0] for line in summary.splitlines()
               if line.split("\t")[4:5] == ["missing"]]
    assert missing == [run]
    snakemake(project, "--cores", "2", *missing, *args)
    assert (project / run).is_file()
    jobs = harness.planned_jobs(snakemake(project, "-n", table, *args).stdout)
    assert [j["rule"] for j in jobs] == ["aggregate"]
    assert "Input files updated by another job" in jobs[0]["reason"] or \
        "Updated input files" in jobs[0]["reason"], jobs


# -- one study per results directory -----------------------------------------------------------

def test_a_results_directory_holding_another_study_is_refused_before_any_job(project, tmp_path):
    """A run records its study in its results directory; a study with another config from
    another working directory is refused by its dry run already, naming both (in-process cases:
    tests/test_results_lock.py)."""
    shared = tmp_path / "shared results"
    args = ["--config", f"results={shared}", "results_anywhere=True"]  # outside the project
    snakemake(project, "--cores", "1", f"{shared}/data/star2d.npz", *args)
    path = shared / ".bnstudy-study.json"
    record = json.loads(path.read_text())
    assert record["working_directory"] == str(project.resolve())
    mine = record["config_hash"]
    assert (shared / ".bnstudy-study.lock").is_file()
    snakemake(project, "-n", *args)  # the same study proceeds
    path.write_text(json.dumps({**record, "config_hash": "0123456789abcdef",
                                "working_directory": "/elsewhere/project"}))
    proc = snakemake(project, "-n", *args, check=False)
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "holds another study: config hash 0123456789abcdef" in proc.stderr
    assert f"this run has config hash {mine}" in proc.stderr
    assert "/elsewhere/project" in proc.stderr and str(project.resolve()) in proc.stderr
    assert "Traceback" not in proc.stderr
