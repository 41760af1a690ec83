"""The tiny study through the ``slurm`` workflow profile on a real (local, single-node) SLURM.

One Snakemake run with ``--workflow-profile workflow/profiles/slurm`` submits every job with
sbatch to the cluster of :mod:`slurm_fixture`. While it runs, the train job is cancelled
(``scancel``: what a node failure or a time limit does) once its resume file exists; the
profile's ``retries`` resubmit it and it resumes from its latest checkpoint. The tests then check
the sbatch requests SLURM recorded (GPU for training only, grouped measures), the retry, and
that every table equals the one of an uninterrupted local run.

Only three settings are added on the command line, all specific to this test cluster: job status
through ``squeue`` (no accounting database here), a 5 s first status check (default 40 s), and
``--cores`` = the node's CPUs (group jobs are capped at it; the profile's 4 would not fit).
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import slurm_fixture
import tiny_study
import yaml

from bnstudy import measures

RUNS = [("star", "none", "0"), ("star", "batchnorm", "0")]  # the tiny study's runs
RUN = RUNS[1]  # the run whose training is cancelled mid-way
GROUPS = [f"measures_{e}_{n}_seed{s}" for e, n, s in RUNS]  # their measures' groups


@pytest.fixture(scope="module")
def cluster():
    t0 = time.perf_counter()
    with slurm_fixture.local_slurm() as c:
        c.setup_seconds = time.perf_counter() - t0
        yield c


@pytest.fixture(scope="module")
def local_study(tmp_path_factory) -> dict:
    return tiny_study.local_study(tmp_path_factory)


def _cancel_train_when_resumable(cluster, resume, stop: threading.Event, record: dict):
    """scancel the running train job as soon as its resume file exists (once)."""
    while not stop.is_set():
        if resume.exists():
            for job in cluster.jobs():
                if (job.get("Comment", "").startswith(f"rule_train_wildcards_{'_'.join(RUN)}")
                        and job.get("JobState") == "RUNNING"):
                    cluster.cmd("scancel", job["JobId"])
                    record.update(job=job["JobId"], at=time.perf_counter())
                    return
        time.sleep(0.1)


@pytest.fixture(scope="module")
def slurm_study(cluster, tmp_path_factory) -> dict:
    project = tiny_study.copy_project(tmp_path_factory.mktemp("slurm") / "project",
                                      source=tiny_study.snapshot(tmp_path_factory))
    resume = project.joinpath("results", "runs", *RUN[:2], f"seed{RUN[2]}", "resume.pt")
    cmd = [sys.executable, "-m", "snakemake", "--workflow-profile", "workflow/profiles/slurm",
           "--slurm-status-command", "squeue", "--slurm-init-seconds-before-status-checks", "5",
           "--cores", str(cluster.cpus)]
    env = tiny_study.env(project, cluster.bin_dir, {"SLURM_CONF": str(cluster.conf)})
    stop, killed = threading.Event(), {}
    killer = threading.Thread(target=_cancel_train_when_resumable,
                              args=(cluster, resume, stop, killed), daemon=True)
    t0 = time.perf_counter()
    killer.start()
    try:
        proc = subprocess.run(cmd, cwd=project, env=env, capture_output=True, text=True,
                              timeout=1800)
    finally:
        stop.set()
        killer.join(timeout=30)
    seconds = time.perf_counter() - t0
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"snakemake through SLURM failed:\n{log[-8000:]}"
    jobs = [j for j in cluster.jobs() if j.get("WorkDir") == str(project)]
    print(f"\nSLURM: fixture setup {cluster.setup_seconds:.1f}s (install "
          f"{cluster.install_seconds:.1f}s, daemons {cluster.start_seconds:.1f}s); tiny study "
          f"{seconds:.1f}s wall, {len(jobs)} cluster jobs: "
          f"{sorted(j.get('Comment', '?') for j in jobs)}")
    return {"project": project, "results": project / "results", "log": log, "jobs": jobs,
            "seconds": seconds, "killed": killed}


def _rule(job: dict) -> str:
    """The rule or group a cluster job ran, from the comment the executor sets:
    ``rule_<rule>_wildcards_<values>`` or ``rule_<group>_<its rules>``."""
    comment = job.get("Comment", "").removeprefix("rule_").split("_wildcards_")[0]
    for group in (*GROUPS, "tables", "figures"):
        if comment.startswith(f"{group}_"):
            return group
    return comment


def _config_sections(project) -> set[str]:
    return set(yaml.safe_load((project / "config" / "config.yaml").read_text()))


def test_profile_groups_every_measure():
    """A measure rule missing from the profile's groups would be one cluster job per run each."""
    profile = yaml.safe_load((tiny_study.REPO / "workflow/profiles/slurm/config.yaml").read_text())
    assert profile["executor"] == "slurm" and profile["retries"] >= 1
    assert profile["set-resources"]["train"]["gpu"] == 1
    for name in measures.REGISTRY:
        assert profile["groups"].get(name) == "measures_{experiment}_{norm}_seed{seed}", name
    assert profile["group-components"]["measures_{experiment}_{norm}_seed{seed}"] >= len(
        measures.REGISTRY)


def _processes_mentioning(text: str) -> list[str]:
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            args = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:  # the process ended meanwhile
            continue
        if text in args:
            found.append(f"{cmdline.parent.name}: {args}")
    return found


@pytest.mark.workflow
def test_fixture_starts_a_gpu_node_and_stops_every_daemon_it_started():
    with slurm_fixture.local_slurm() as c:
        assert set(c.procs) == {"munged", "slurmctld", "slurmd"}
        assert c.cmd("sinfo", "--noheader", "--format=%T %G").split() == ["idle", "gpu:1"]
        assert len(_processes_mentioning(str(c.root))) >= 3
        root = c.root
    assert all(p.poll() is not None for p in c.procs.values())
    assert _processes_mentioning(str(root)) == []
    assert not root.exists()


def _gpus(job: dict) -> str:
    return " ".join(job.get(k, "") for k in ("TresPerJob", "TresPerNode", "TresPerTask"))


@pytest.mark.workflow
def test_train_jobs_request_a_gpu_and_nothing_else_does(slurm_study):
    train = [j for j in slurm_study["jobs"] if _rule(j) == "train"]
    assert train, [j.get("Comment") for j in slurm_study["jobs"]]
    for job in slurm_study["jobs"]:
        assert ("gres:gpu:1" in _gpus(job)) == (_rule(job) == "train"), job
    assert all(j["TimeLimit"] == "02:00:00" for j in train)  # the profile's runtime: 120
    assert all(j["MinMemoryNode"] == "8000M" for j in train), train  # and mem_mb: 8000


@pytest.mark.workflow
def test_killed_train_job_is_retried_and_resumes(slurm_study):
    assert slurm_study["killed"], "the train job finished before it could be cancelled"
    train = sorted((j for j in slurm_study["jobs"] if _rule(j) == "train"
                    and j["Comment"].endswith("_".join(RUN))), key=lambda j: int(j["JobId"]))
    assert [j["JobState"] for j in train] == ["CANCELLED", "COMPLETED"], train
    assert train[0]["JobId"] == slurm_study["killed"]["job"]
    log = slurm_study["results"].joinpath("logs", "train", *RUN[:2], f"seed{RUN[2]}.log")
    assert "resuming from" in log.read_text(), log.read_text()[-2000:]
    assert not slurm_study["results"].joinpath(
        "runs", *RUN[:2], f"seed{RUN[2]}", "resume.pt").exists()


@pytest.mark.workflow
def test_measures_of_a_run_share_one_cluster_job(slurm_study):
    rules = [_rule(j) for j in slurm_study["jobs"]]
    assert all(rules.count(g) == 1 for g in GROUPS), rules
    assert rules.count("tables") == 1 and rules.count("figures") == 1, rules
    for rule in (*measures.REGISTRY, "aggregate", "plot", "plot_study", "report"):
        assert rule not in rules, f"{rule} was submitted on its own: {rules}"
    sections = _config_sections(slurm_study["project"])
    for group in (j for j in slurm_study["jobs"] if _rule(j) in GROUPS):
        # every configured measure that applies to the runs' data (the star runs: star2d)
        assert all(m in group["Comment"] for m, spec in measures.REGISTRY.items()
                   if m in sections and spec.applies_to("star2d")), group


@pytest.mark.workflow
def test_tables_equal_those_of_a_local_run(slurm_study, local_study):
    slurm = tiny_study.read_tables(slurm_study["results"])
    local = tiny_study.read_tables(local_study["results"])
    assert "training" in slurm and len(slurm) >= 2, sorted(slurm)
    tiny_study.assert_tables_equal(local, slurm)
    print(f"\nlocal run {local_study['seconds']:.1f}s; SLURM run {slurm_study['seconds']:.1f}s; "
          f"{len(slurm)} tables identical: {sorted(slurm)}")
