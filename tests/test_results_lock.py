"""One study per results directory (:mod:`bnstudy.planning.lock`), in-process.

Two working directories whose studies write one ``results`` directory would mix their tables
(each Snakemake knows only its own jobs). The directory records its study's config hash and
working directory; another study from another working directory is refused with a message
naming both; a run holds the directory's lock, and a second run while it is held is refused.
"""

from __future__ import annotations

import fcntl
import json
import os

import pytest

from bnstudy.config.loader import ConfigError
from bnstudy.planning import lock as results_lock


@pytest.fixture
def dirs(tmp_path, monkeypatch):
    a, b = tmp_path / "project_a", tmp_path / "project_b"
    a.mkdir(), b.mkdir()
    monkeypatch.chdir(a)
    results = tmp_path / "shared_results"
    yield a, b, results
    results_lock.release(results)


def cfg(results, lr=0.1) -> dict:
    return {"results": str(results), "trainings": {"sgd": {"lr": lr}}}


def test_a_second_study_from_another_directory_is_refused_naming_both(dirs, monkeypatch):
    a, b, results = dirs
    first = cfg(results)
    results_lock.claim(first, ["study_a.yaml"])
    record = json.loads((results / results_lock.STUDY_FILE).read_text())
    assert record["config_hash"] == results_lock.config_hash(first)
    assert record["working_directory"] == str(a.resolve())
    results_lock.release(results)
    monkeypatch.chdir(b)
    other = cfg(results, lr=0.2)
    for step in (results_lock.check, results_lock.claim):
        with pytest.raises(ConfigError) as e:
            step(other, ["study_b.yaml"])
        msg = str(e.value)
        assert msg.startswith(f"results: {str(results)!r} holds another study")
        for name in (results_lock.config_hash(first), results_lock.config_hash(other),
                     str(a / "study_a.yaml"), str(b / "study_b.yaml"), str(a), str(b)):
            assert name in msg, (name, msg)
        assert f"delete {results / results_lock.STUDY_FILE}" in msg


def test_a_same_config_rerun_and_an_edit_in_the_same_directory_proceed(dirs, monkeypatch):
    a, b, results = dirs
    results_lock.claim(cfg(results), ["s.yaml"])
    results_lock.claim(cfg(results), ["s.yaml"])  # a rerun in the same process
    results_lock.release(results)
    monkeypatch.chdir(b)
    results_lock.check(cfg(results), ["s.yaml"])  # the same config from elsewhere
    monkeypatch.chdir(a)
    edited = cfg(results, lr=0.3)  # its own study, edited: Snakemake reruns what changed
    results_lock.claim(edited, ["s.yaml"])
    record = json.loads((results / results_lock.STUDY_FILE).read_text())
    assert record["config_hash"] == results_lock.config_hash(edited)


def test_the_results_path_is_not_part_of_the_study(tmp_path):
    assert results_lock.config_hash(cfg("results")) == results_lock.config_hash(
        cfg(tmp_path / "results"))


def _other_run(results, config_hash: str) -> int:
    """A lock held as another process's run would hold it (a second open file: flock treats
    it as another holder), with that run's record in it."""
    results.mkdir(parents=True, exist_ok=True)
    fd = os.open(results / results_lock.LOCK_FILE, os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    os.pwrite(fd, json.dumps({"pid": 4242, "host": "elsewhere", "config_hash": config_hash,
                              "working_directory": "/x", "since": "today"}).encode(), 0)
    return fd


def test_a_run_while_another_holds_the_lock_is_refused(dirs):
    _, _, results = dirs
    mine = cfg(results)
    fd = _other_run(results, results_lock.config_hash(cfg(results, lr=9.0)))
    try:
        with pytest.raises(ConfigError, match="being written by another study's run: pid 4242 "
                                              "on host elsewhere"):
            results_lock.check(mine, ["s.yaml"])
    finally:
        os.close(fd)
    fd = _other_run(results, results_lock.config_hash(mine))
    try:
        results_lock.check(mine, ["s.yaml"])  # its own run (a cluster job reading the Snakefile)
        with pytest.raises(ConfigError, match="being written by another run: pid 4242"):
            results_lock.claim(mine, ["s.yaml"])
    finally:
        os.close(fd)
    results_lock.claim(mine, ["s.yaml"])  # the lock went with its holder
    holder = json.loads((results / results_lock.LOCK_FILE).read_text())
    assert holder["pid"] == os.getpid() and holder["config_hash"] == results_lock.config_hash(mine)


def test_an_unreadable_study_record_is_named(dirs):
    _, _, results = dirs
    results.mkdir()
    (results / results_lock.STUDY_FILE).write_text("{not json")
    with pytest.raises(ConfigError, match=r"unreadable study record .*\.bnstudy-study\.json"):
        results_lock.check(cfg(results), ["s.yaml"])


def test_a_results_directory_that_cannot_be_made_is_one_message(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(ConfigError, match="cannot be created or locked"):
        results_lock.claim(cfg(tmp_path / "file" / "results"), ["s.yaml"])
