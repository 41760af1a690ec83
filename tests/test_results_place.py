"""``results:`` names a directory where a study belongs (issue 50, item 2).

``results: /etc`` passed ``check`` and ``snakemake -n`` planned jobs writing ``/etc/data``; a
relative path climbing out of the working directory was accepted too. A study's results now
lie under the working directory unless ``results_anywhere: true`` says otherwise, and must be
a new or empty directory or one a bnstudy run made (its marker); ``~`` is expanded, and the
refusal shows the expanded path. ``check`` and the Snakefile use the same check.
"""

from __future__ import annotations

import copy
import os
import subprocess
import sys
from pathlib import Path

import pytest
from harness import copy_project, snakemake, tiny_config, write_config

from bnstudy.config import loader, paths, study
from bnstudy.planning import lock

BASE = tiny_config()


def checked(tmp_path, results, **more) -> dict:
    cfg = copy.deepcopy(BASE)
    cfg.update(results=results, **more)
    return study.check(cfg)


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    wd = tmp_path / "work"
    wd.mkdir()
    monkeypatch.chdir(wd)
    return wd


def test_a_new_path_under_the_working_directory_is_accepted(workdir):
    assert checked(workdir, "results/x")["results"] == "results/x"
    assert checked(workdir, str(workdir / "results" / "y"))["results_anywhere"] is False


@pytest.mark.parametrize("results", ["/etc", "../../../../elsewhere", "../sibling", "~/x"])
def test_a_path_outside_the_working_directory_is_refused(workdir, results):
    with pytest.raises(loader.ConfigError) as e:
        checked(workdir, results)
    msg = str(e.value)
    assert msg.startswith(f"results: {results!r}") and "\n" not in msg
    assert "outside the working directory" in msg and "results_anywhere: true" in msg
    if results.startswith("~"):
        assert repr(os.path.expanduser(results)) in msg  # the expansion shown


def test_a_directory_holding_other_files_is_refused_even_when_allowed_elsewhere(workdir):
    with pytest.raises(loader.ConfigError, match=r"'/etc' is an existing directory holding "
                                                 r"other files .* no bnstudy marker"):
        checked(workdir, "/etc", results_anywhere=True)
    (workdir / "mine").mkdir()
    (workdir / "mine" / "notes.txt").write_text("mine")
    with pytest.raises(loader.ConfigError, match="'notes.txt'"):
        checked(workdir, "mine")


def test_empty_marked_or_recorded_directories_are_accepted(workdir, tmp_path):
    for name in ("empty", "marked", "recorded"):
        (workdir / name).mkdir()
    (workdir / "marked" / paths.RESULTS_MARKER).write_bytes(lock.MARKER_TEXT)
    (workdir / "marked" / "runs").mkdir()
    (workdir / "recorded" / lock.STUDY_FILE).write_text("{}")
    for name in ("empty", "marked", "recorded"):
        checked(workdir, name)
    elsewhere = tmp_path / "elsewhere"
    assert checked(workdir, str(elsewhere), results_anywhere=True)["results"] == str(elsewhere)
    checked(workdir, "../elsewhere", results_anywhere=True)


def test_a_run_marks_its_results_directory(workdir):
    cfg = checked(workdir, "results/x")
    lock.claim(cfg, ["study.yaml"])
    try:
        assert (workdir / "results" / "x" / paths.RESULTS_MARKER).read_bytes() == lock.MARKER_TEXT
    finally:
        lock.release("results/x")
    checked(workdir, "results/x")  # the run's own directory, not empty now: still accepted


def test_the_shipped_results_directory_is_marked():
    repo = Path(__file__).resolve().parent.parent
    assert (repo / "results" / paths.RESULTS_MARKER).read_bytes() == lock.MARKER_TEXT


def test_the_check_verb_refuses_etc(tmp_path):
    f = write_config(tmp_path / "etc.yaml", {**BASE, "results": "/etc"})
    out = subprocess.run([sys.executable, "-m", "bnstudy", "check", str(f)],
                         capture_output=True, text=True)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "results: '/etc' lies outside the working directory" in out.stderr


@pytest.mark.workflow
@pytest.mark.parametrize("results", ["/etc", "../../../../elsewhere"])
def test_snakemake_refuses_it_at_its_start(tmp_path_factory, results):
    project = copy_project(tmp_path_factory.mktemp("place") / "project")
    f = write_config(project / "bad.yaml", {**BASE, "results": results})
    proc = snakemake(project, "-n", "--configfile", str(f), check=False)
    text = proc.stdout + proc.stderr
    assert proc.returncode == 1 and "Traceback" not in text, text[-2000:]
    assert f"results: {results!r} lies outside the working directory" in text
