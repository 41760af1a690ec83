"""Shared fixtures: small datasets; single-threaded torch for stable timings (specs: specs.py)."""

from __future__ import annotations

import gc
import os

import pytest
import torch

from bnstudy import data

torch.set_num_threads(1)

# Under pytest-xdist (the README's test command: ``-n logical --dist loadgroup``), the modules
# whose tests run whole studies start first, so that the long ones (the SLURM module, the tiny
# study every workflow test copies: harness.local_study) overlap the many short tests instead of
# ending the session alone. Within a module, and among the rest, the order is kept.
FIRST = ("test_slurm.py", "test_workflow.py", "test_extension.py", "test_reruns.py",
         "test_replication_workflow.py", "test_report_workflow.py", "test_resume.py",
         "test_replication.py", "test_safety.py", "test_config_check.py")
# The modules that run on one worker, whole: their module fixtures are expensive (a SLURM
# cluster and two runs of a study; a replicated study; every figure family drawn), and a second
# worker would build them again. (The group is given here, not by an ``xdist_group`` mark:
# under pytest 9.2 pytest-xdist 3.8 drops the marks' groups silently, pytest-xdist#1386.)
ONE_WORKER = ("test_slurm.py", "test_replication_workflow.py", "test_figure_style.py")


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """``--dist loadgroup``: each test a unit of work of its own, but a module of
    :data:`ONE_WORKER` one unit (or a test's ``xdist_group``, once xdist passes it on)."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class Scheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            if nodeid.rfind("@") > nodeid.rfind("]"):
                return nodeid.rsplit("@", 1)[1]
            module = nodeid.split("::", 1)[0]
            return module if module.rsplit("/", 1)[-1] in ONE_WORKER else nodeid

    return Scheduling(config, log)


def pytest_xdist_auto_num_workers(config):
    """``-n logical`` (or ``auto``): a worker per CPU this process may run on, plus one. The
    SLURM module's worker waits on its cluster's status checks for most of its run (the
    cluster's jobs run as processes of their own), so without the extra worker a CPU would idle
    while every other test queued behind the remaining workers."""
    return len(os.sched_getaffinity(0)) + 1


def pytest_collection_finish(session):
    """What collection loaded (torch, pandas, the test modules: some 380,000 objects) stays out
    of the garbage collector's full passes, each of which would otherwise walk it (0.2 s; the
    Holm adjustment of every claims ledger calls gc.collect())."""
    gc.collect()
    gc.freeze()


def pytest_collection_modifyitems(config, items):
    if os.environ.get("PYTEST_XDIST_WORKER"):  # (the workers collect; the order is theirs)
        rank = {name: i for i, name in enumerate(FIRST)}
        items.sort(key=lambda item: rank.get(item.path.name, len(FIRST)))


@pytest.fixture(scope="session", autouse=True)
def keyed_cache_of_the_session(tmp_path_factory):
    """The session's own cache of config checks and model sizes (bnstudy.keyed_cache, which
    Snakemake starts and cluster jobs read), shared by its pytest-xdist workers: each config is
    checked in full once per session, whatever an earlier session or the user's cache holds (a
    cache set in the environment is kept)."""
    import harness

    os.environ.setdefault("BNSTUDY_CACHE", str(harness.shared_dir(tmp_path_factory) / "cache"))


@pytest.fixture(scope="session")
def star():
    return data.make("star2d", {"n_train": 64, "n_test": 64, "seed": 0})


@pytest.fixture(scope="session")
def linear_ds():
    return data.make("gaussian_linear", {"n_train": 64, "n_test": 32, "dim": 4, "seed": 0})


@pytest.fixture(scope="session")
def digits():
    return data.make("digits", {"seed": 0})

