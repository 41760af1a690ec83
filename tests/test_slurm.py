"""The tiny study through the ``slurm`` workflow profile on a real (local, single-node) SLURM.

One Snakemake run with ``--workflow-profile workflow/profiles/slurm`` submits every job with
sbatch to the cluster of :mod:`slurm_fixture`. While it runs, a train job is cancelled
(``scancel``: what a node failure or a time limit does) once its resume file exists; the
profile's ``retries`` resubmit it and it resumes from its latest checkpoint. The tests then check
the sbatch requests SLURM recorded (GPU for training only, the measures of an experiment in one
cluster job, tables and figures grouped), the retry, and that every table equals the one of an
uninterrupted local run of the same study.

The study is the tiny one (.test/config.yaml) without its dln experiment (star and ts run every
measure), with the star experiment's training lengthened to 1000 steps
(:func:`harness.with_steps`), so that its train jobs run long enough (seconds) to be cancelled
mid-run, a replication policy on star (rounds of 2 and 3 seeds), so that its rounds run as
checkpoints through the cluster, and two figure families (``plots.families``) in the figures
group; the local run uses the same config.

Only three settings are added on the command line, all specific to this test cluster: job status
through ``squeue`` (no accounting database here), a 5 s first status check (default 40 s), and
``--cores`` = the node's CPUs (group jobs are capped at it; the profile's 4 would not fit).
"""

from __future__ import annotations

import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import harness
import pytest
import slurm_fixture
import yaml

from bnstudy import measures, plots
from bnstudy.config import study
from bnstudy.planning.plan import Plan

RUN = ("star", "batchnorm", "0")  # the run whose training (its block's job) is cancelled mid-way
# the train rule of RUN's block (bnstudy.planning.training: train_<experiment>_<norm>_s<seeds>,
# a block of the first round's seeds starts at seed 0)
RUN_RULE = f"train_{RUN[0]}_{RUN[1]}_s{RUN[2]}"
STEPS = 1000  # the star experiment's training: long enough to be cancelled


def _config(source) -> dict:
    # star (every measure but teacher-student, the rounds, the cancelled job) and ts (the
    # teacher-student measure); the tiny study's dln would add three cluster jobs of the same
    # kinds (data, training, a measures group) and nothing the profile treats otherwise
    cfg = harness.only_experiments(harness.tiny_config(source), "star", "ts")
    cfg = harness.with_steps(cfg, STEPS, ["star"])
    cfg["experiments"]["star"]["replication"] = {"rounds": [2, 3]}
    # the tiny study's estimates need no GPU: its trainings ask for one by override (the
    # fixture's node has one), the rest keep their estimates (bnstudy.planning.resources)
    cfg["resources"] = {"train": {"gpu": 1}}
    # two figure families (one per experiment, one for the study) make the figures group; every
    # family is drawn by the local tests, and on a cluster each figure job is a process of its
    # own (all families: about 90 of the run's 370 CPU-seconds, and 1.5 min of its wall time)
    harness.with_figures(cfg, "training_curves", "teacher_student_curves")
    return cfg


def _final(plan: Plan, results) -> Plan:
    """The plan reading the rounds the run took (its results' round files)."""
    return Plan({**plan.config, "results": str(results)})


@pytest.fixture(scope="module")
def plan(tmp_path_factory) -> Plan:
    path = harness.write_config(tmp_path_factory.mktemp("plan") / "config.yaml",
                                _config(harness.REPO))
    return Plan(study.check(study.load([path])))


@pytest.fixture(scope="module")
def groups(plan) -> dict[str, str]:
    """The measure groups of the study, ``{group: experiment}``: one per experiment."""
    return {f"measures_{e}": e for e in plan.experiments if plan.experiment_measures(e)}


@pytest.fixture(scope="module")
def cluster():
    t0 = time.perf_counter()
    with slurm_fixture.local_slurm() as c:
        c.setup_seconds = time.perf_counter() - t0
        yield c


@pytest.fixture(scope="module")
def local_run(tmp_path_factory, plan):
    """The same study run locally (from the session's snapshot, as the SLURM run), started in
    the background before the SLURM run: it runs while that run waits on its cluster (one core:
    the cluster's jobs have the others). :func:`local_study` waits for it. Its targets are the
    study's tables (the plan's, and the claims ledger), the only results the tests compare:
    its figures and report would be half of its CPU time, taken from the cluster's jobs. (Not
    ``--until`` the rules that write them: with the replication rounds' checkpoints Snakemake
    then leaves the claims job unstarted, snakemake#823.)"""
    source = harness.snapshot(tmp_path_factory)
    project = harness.copy_project(tmp_path_factory.mktemp("local_slurm") / "project",
                                   source=source, config=_config(source))
    local = _final(plan, "results")  # the copy's results, as its jobs name them
    tables = [*local.all_tables(), local.res("tables", "claims.parquet")]
    log = project / "snakemake.log"
    with open(log, "w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "snakemake", "--cores", "1", *tables],
                                cwd=project,
                                env=harness.env(project), stdout=out, stderr=subprocess.STDOUT)
    run = {"project": project, "results": project / "results", "proc": proc, "log": log,
           "t0": time.perf_counter()}
    yield run
    if proc.poll() is None:  # a failed SLURM run ended the module early
        proc.terminate()
        proc.wait(timeout=60)


@pytest.fixture(scope="module")
def local_study(local_run) -> dict:
    """The local run, finished."""
    rc = local_run["proc"].wait(timeout=1800)
    assert rc == 0, f"the local run failed ({rc}):\n{local_run['log'].read_text()[-6000:]}"
    return {**local_run, "seconds": time.perf_counter() - local_run["t0"]}


ERROR_LINE = re.compile(r"error|exception|traceback|failed|cancel|timeout|exceed|without making",
                        re.I)


def _failure(log: str, project: Path) -> str:
    """What a failed run said, errors first: the log's lines that name an error (with the five
    lines after each), the log files those lines name (the jobs' and SLURM's), then the log's
    end. A bare tail of the log is mostly job announcements; CI shows a part of a long one."""
    lines = log.splitlines()
    picked = sorted({j for i, line in enumerate(lines) if ERROR_LINE.search(line)
                     for j in range(i, min(i + 6, len(lines)))})
    errors = "\n".join(lines[j] for j in picked)[-6000:]
    logs = [f"--- {p}:\n{(project / p).read_text(errors='replace')[-1500:]}"
            for p in dict.fromkeys(re.findall(r"([\w./-]+\.log)\b", errors))
            if (project / p).is_file()]
    return f"{errors}\n{chr(10).join(logs)[-4000:]}\n--- the log's end:\n{log[-2000:]}"


def _cancel_train_when_resumable(cluster, resume, stop: threading.Event, record: dict):
    """scancel the running train job as soon as its resume file exists (once)."""
    while not stop.is_set():
        if resume.exists():
            for job in cluster.jobs():
                if (job.get("Comment", "").startswith(f"rule_{RUN_RULE}")
                        and job.get("JobState") == "RUNNING"):
                    cluster.cmd("scancel", job["JobId"])
                    record.update(job=job["JobId"], at=time.perf_counter())
                    return
        time.sleep(0.1)


def _snakemake_crashed(log: str) -> bool:
    """Whether a failed run ended in an exception of Snakemake itself rather than a job error
    (no ``Error in rule``/``Error in group``): checkpoints and group jobs together have known
    scheduler races (snakemake#1331, snakemake-executor-plugin-slurm#463), among them a run
    that ends with success before its claims, figures and report, some group jobs submitted
    twice (snakemake#823, snakemake-executor-plugin-slurm#253), which the Snakefile's
    ``onsuccess`` turns into a failure naming the missing files (bnstudy.planning.targets)."""
    return "Error in rule" not in log and "Error in group" not in log


def _slurm_run(cluster, tmp_path_factory) -> dict:
    """One run of the study through the profile on a fresh copy, cancelling a train job."""
    source = harness.snapshot(tmp_path_factory)
    project = harness.copy_project(tmp_path_factory.mktemp("slurm") / "project",
                                   source=source, config=_config(source))
    resume = project.joinpath("results", "runs", *RUN[:2], f"seed{RUN[2]}", "resume.pt")
    cmd = [sys.executable, "-m", "snakemake", "--workflow-profile", "workflow/profiles/slurm",
           "--slurm-status-command", "squeue", "--slurm-init-seconds-before-status-checks", "5",
           "--cores", str(cluster.cpus)]
    env = harness.env(project, cluster.bin_dir, {"SLURM_CONF": str(cluster.conf)})
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
    return {"project": project, "results": project / "results", "proc": proc,
            "log": proc.stdout + proc.stderr, "seconds": time.perf_counter() - t0,
            "killed": killed}


@pytest.fixture(scope="module")
def slurm_study(cluster, local_run, tmp_path_factory) -> dict:
    """The study through SLURM. A run that ends in a crash of Snakemake's own scheduler or
    early without its targets (not a job error: :func:`_snakemake_crashed`) is run once more
    from scratch on a fresh copy, its failure printed (the tests count the cluster jobs of one
    clean run); a job error, or a second such failure, fails here with the errors first."""
    run = _slurm_run(cluster, tmp_path_factory)
    if run["proc"].returncode != 0 and _snakemake_crashed(run["log"]):
        print(f"\nSLURM run 1 ended in a Snakemake crash or early; running the study again:\n"
              f"{_failure(run['log'], run['project'])}")
        for job in cluster.jobs():  # what the crashed run left queued or running
            if (job.get("WorkDir") == str(run["project"])
                    and job.get("JobState") in ("PENDING", "RUNNING")):
                cluster.cmd("scancel", job["JobId"])
        run = _slurm_run(cluster, tmp_path_factory)
    proc, project, log = run["proc"], run["project"], run["log"]
    assert proc.returncode == 0, (f"snakemake through SLURM failed ({proc.returncode}):\n"
                                  f"{_failure(log, project)}")
    jobs = [j for j in cluster.jobs() if j.get("WorkDir") == str(project)]
    print(f"\nSLURM: fixture setup {cluster.setup_seconds:.1f}s (install "
          f"{cluster.install_seconds:.1f}s, daemons {cluster.start_seconds:.1f}s); tiny study "
          f"{run['seconds']:.1f}s wall, {len(jobs)} cluster jobs: "
          f"{sorted(j.get('Comment', '?') for j in jobs)}")
    return {**run, "jobs": jobs}


def _rule(job: dict, groups) -> str:
    """The rule or group a cluster job ran, from the comment the executor sets:
    ``rule_<rule>_wildcards_<values>`` or ``rule_<group>_<its rules>``."""
    comment = job.get("Comment", "").removeprefix("rule_").split("_wildcards_")[0]
    if comment.startswith("train_"):  # a block's train rule (bnstudy.planning.training)
        return "train"
    for group in (*groups, "tables", "figures"):
        if comment.startswith(f"{group}_"):
            return group
    return comment


PROFILE = harness.REPO / "workflow/profiles/slurm/config.yaml"


def test_every_measure_is_grouped_by_its_rule_not_by_a_profile_list():
    """A measure rule outside the group would be one cluster job per experiment each. The group
    is the measure rules' own (one rule per registered measure, so a new measure needs no
    profile edit); it takes the experiment wildcard only (not the block of seeds: the measures
    of one block share a job), and the profile does not override it."""
    profile = yaml.safe_load(PROFILE.read_text())
    assert profile["executor"] == "slurm" and profile["retries"] >= 1
    assert "set-resources" not in profile  # every rule's requests come from the study
    rules = (harness.REPO / "workflow/rules/measures.smk").read_text()
    assert "for _measure in PLAN.measures:" in rules
    assert re.search(r'group:\s*"measures_\{experiment\}"', rules), "measure rules' group"
    for name in measures.REGISTRY:
        assert profile["groups"].get(name, "measures_{experiment}") == "measures_{experiment}"
    assert profile["group-components"]["measures_{experiment}"] >= len(measures.REGISTRY)


def test_profile_names_only_rules_that_exist():
    """Settings for a rule the workflow no longer has (a renamed or removed rule) do nothing,
    silently: every rule the profile names is one of the workflow's."""
    plots.load_all()
    rules = {"prepare_data", "train", "aggregate", "analysis", "claims", "report",
             *measures.REGISTRY, *(f"plot_{f}" for f in plots.FAMILIES)}
    profile = yaml.safe_load(PROFILE.read_text())
    for key in ("groups", "set-resources", "set-threads"):
        assert set(profile.get(key, {})) <= rules, (key, sorted(set(profile[key]) - rules))


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
        assert c.cmd("sinfo", "--noheader", "--format=%T %G").split() == [
            "idle", f"gpu:{len(slurm_fixture.FAKE_GPUS)}"]
        assert len(_processes_mentioning(str(c.root))) >= 3
        root = c.root
    assert all(p.poll() is not None for p in c.procs.values())
    assert _processes_mentioning(str(root)) == []
    assert not root.exists()


def _gpus(job: dict) -> str:
    return " ".join(job.get(k, "") for k in ("TresPerJob", "TresPerNode", "TresPerTask"))


@pytest.mark.workflow
def test_train_jobs_request_a_gpu_and_nothing_else_does(slurm_study, groups, plan):
    train = [j for j in slurm_study["jobs"] if _rule(j, groups) == "train"]
    # one per block of an arm's seeds of the rounds taken (and a retry of the cancelled one)
    final = _final(plan, slurm_study["results"])
    grid = final.grid(plan.experiments)
    assert len(grid["star"]["seeds"]) == 3, grid["star"]  # round 0 left star undecided
    assert len({j["Comment"] for j in train}) == final.train_job_count(grid), [
        j["Comment"] for j in train]
    for job in slurm_study["jobs"]:
        assert ("gres:gpu:1" in _gpus(job)) == (_rule(job, groups) == "train"), job
    # each train job asks for what the plan estimates for its block (bnstudy.planning.resources)
    for job in train:
        name = job["Comment"].removeprefix("rule_").split("_wildcards_")[0]
        want = final.job_resources(name, {})
        assert want["gpu"] == 1, want
        h, m = divmod(int(want["runtime"]), 60)
        assert job["TimeLimit"] == f"{h:02d}:{m:02d}:00", (job["TimeLimit"], want)
        assert job["MinMemoryNode"] == f"{int(want['mem_mb'])}M", (job, want)


@pytest.mark.workflow
def test_killed_train_job_is_retried_and_resumes(slurm_study, groups):
    assert slurm_study["killed"], "the train job finished before it could be cancelled"
    train = sorted((j for j in slurm_study["jobs"] if _rule(j, groups) == "train"
                    and j["Comment"].startswith(f"rule_{RUN_RULE}")), key=lambda j: int(j["JobId"]))
    assert [j["JobState"] for j in train] == ["CANCELLED", "COMPLETED"], train
    assert train[0]["JobId"] == slurm_study["killed"]["job"]
    (log,) = slurm_study["results"].joinpath("logs", "train", *RUN[:2]).glob(f"seeds{RUN[2]}*.log")
    assert "resuming from" in log.read_text(), log.read_text()[-2000:]
    assert not slurm_study["results"].joinpath(
        "runs", *RUN[:2], f"seed{RUN[2]}", "resume.pt").exists()


@pytest.mark.workflow
def test_measures_of_an_experiment_share_one_cluster_job(slurm_study, groups, plan):
    """Per block of seeds: star's two rounds are two blocks, measured by one job each."""
    rules = [_rule(j, groups) for j in slurm_study["jobs"]]
    final = _final(plan, slurm_study["results"])
    assert all(rules.count(g) == len(final.blocks(e)) for g, e in groups.items()), rules
    assert rules.count("replication_round") == 2, rules
    assert rules.count("tables") == 1 and rules.count("figures") == 1, rules
    for rule in (*measures.REGISTRY, "aggregate", "claims", "report"):
        assert rule not in rules, f"{rule} was submitted on its own: {rules}"
    assert not [r for r in rules if r.startswith("plot_")], rules
    for job in (j for j in slurm_study["jobs"] if _rule(j, groups) in groups):
        # every measure the experiment runs, and no other experiment's
        e = groups[_rule(job, groups)]
        want = plan.experiment_measures(e)
        shown = [m for m in want if m in job["Comment"]]
        # Snakemake names a group job by at most five of its rules (sorted), then "..."
        # (snakemake.jobs.GroupJob.name): star's six measures show five
        assert len(shown) == len(want) or (job["Comment"].endswith("...")
                                           and len(shown) == 5), job["Comment"]


@pytest.mark.workflow
def test_tables_equal_those_of_a_local_run(slurm_study, local_study):
    slurm = harness.read_tables(slurm_study["results"])
    local = harness.read_tables(local_study["results"])
    assert "training" in slurm and len(slurm) >= 1 + len(measures.REGISTRY), sorted(slurm)
    harness.assert_tables_equal(local, slurm)
    print(f"\nlocal run {local_study['seconds']:.1f}s; SLURM run {slurm_study['seconds']:.1f}s; "
          f"{len(slurm)} tables identical: {sorted(slurm)}")
