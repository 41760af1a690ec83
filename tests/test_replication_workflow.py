"""Replication rounds through Snakemake's checkpoints, on a two-experiment tiny study.

``star`` declares ``replication: {rounds: [2, 3]}``: round 0's ledger (two seeds) leaves rows
over its runs undecided, so round 1 adds one seed to the arms those rows compare (BN and the
plain net; not its LayerNorm arm, which no row reads). ``ts`` declares a policy too, but no ledger
row is computed from its runs alone (Luo's loads pool experiments under a name of their own), so
it has no unresolved claim and stops at round 0. The tests check the rounds the workflow took
against its round files, that only the experiment with an undecided row got new seeds, that the
ledger reads a replicated experiment's rows at its look's level, that a rerun of the finished
study does nothing, and that raising the planned rounds afterwards trains and measures only the
new seeds (a round never re-measures a block of seeds already measured). The study draws two
figure families (``plots.families``), whose notes give each arm's seeds.
"""

from __future__ import annotations

import json

import harness
import pandas as pd
import pytest

from bnstudy import measures
from bnstudy.claims.decide import sequential
from bnstudy.config import study
from bnstudy.planning.plan import Plan
from bnstudy.tables import layout

pytestmark = pytest.mark.workflow

POLICY = {"rounds": [2, 3]}
FAMILIES = ["training_curves", "generalization_gap"]


def _config(source, rounds) -> dict:
    cfg = harness.only_experiments(harness.tiny_config(source), "star", "ts")
    cfg["experiments"]["star"]["replication"] = {"rounds": rounds}
    # an arm no ledger row reads: a round adds no seeds to it
    cfg["experiments"]["star"]["norms"] = ["none", "batchnorm", "layernorm"]
    cfg["experiments"]["ts"]["replication"] = {"rounds": [2, 3]}
    # two figure families, drawn over the rounds' uneven seeds (layernorm keeps round 0's two):
    # the rounds are what this module tests, every family is drawn by the other workflow tests
    harness.with_figures(cfg, *FAMILIES)
    return cfg


def _plan(project) -> Plan:
    cfg = study.check(study.load([project / "config" / "config.yaml"]), local=False)
    cfg["results"] = str(project / "results")
    return Plan(cfg)


def _records(results) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted((results / "rounds").glob("round*.json"))]


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    source = harness.snapshot(tmp_path_factory)
    project = harness.copy_project(tmp_path_factory.mktemp("replication") / "project",
                                   source=source, config=_config(source, [2, 3]))
    proc = harness.snakemake(project, "--cores", "2")
    return {"project": project, "results": project / "results",
            "jobs": harness.planned_jobs(proc.stdout + proc.stderr)}


def test_rounds_go_on_only_for_experiments_with_an_undecided_row(project):
    records = _records(project["results"])
    assert [r["round"] for r in records] == [0, 1], records
    first = records[0]["experiments"]
    assert first["star"]["continue"] and first["star"]["undecided"], first["star"]
    assert not first["ts"]["continue"] and first["ts"]["undecided"] == [], first["ts"]
    for r in records:  # every open experiment: goes on iff a row is undecided and a round left
        for e, x in r["experiments"].items():
            last = x["look"] == 1
            assert x["continue"] == (x["open"] and bool(x["undecided"]) and not last), (e, x)
    assert records[1]["experiments"]["ts"]["open"] is False
    # the runs that exist are exactly the rounds' seeds
    runs = project["results"] / "runs"
    trained = {(p.parts[-4], p.parts[-3], int(p.parts[-2][4:]))
               for p in runs.glob("*/*/seed*/checkpoints.pt")}
    assert trained == {(e, n, s) for e, ns in (("star", ("none", "batchnorm")),
                                               ("ts", ("batchnorm",)))
                       for n in ns for s in ((0, 1, 2) if e == "star" else (0, 1))} | {
        ("star", "layernorm", 0), ("star", "layernorm", 1)}  # read by no row: round 0 only
    assert records[0]["experiments"]["star"]["norms"] == ["none", "batchnorm"]
    assert sorted(p.name for p in (runs / "star").glob("seeds*")) == ["seeds0-1", "seeds2"]
    train = pd.read_parquet(project["results"] / "tables" / "training.parquet")
    assert train.groupby("experiment")["seed"].nunique().to_dict() == {"star": 3, "ts": 2}
    assert train.groupby("norm")["seed"].nunique()["layernorm"] == 2


def test_each_block_is_measured_once_and_every_round_reads_the_state(project):
    jobs = project["jobs"]
    for m in measures.REGISTRY:
        blocks = sorted(j["wildcards"]["block"] for j in jobs if j["rule"] == m
                        and j["wildcards"].get("experiment") == "star")
        if blocks:
            assert blocks == ["0-1", "2"], (m, blocks)
    rounds = [j for j in jobs if j["rule"] == "replication_round"]
    assert sorted(j["wildcards"]["round"] for j in rounds) == ["0", "1"]
    r1 = next(j for j in rounds if j["wildcards"]["round"] == "1")
    assert any("runs/star/seeds2/" in f for f in r1["input"]), r1["input"]


def test_the_ledger_reads_replicated_rows_at_their_looks_level(project):
    results = project["results"]
    ledger = pd.read_parquet(results / "tables" / "claims.parquet")
    # the rows with an interval (a row whose quantity no seed could give, like the tiny study's
    # Hessian trace from 4 Hutchinson vectors when every estimate is non-positive, has none)
    star = ledger[(ledger["experiment"] == "star") & (ledger["n_seeds"] >= 2)]
    # each row at the level of the look its own seeds were taken at (default spending: obf)
    alphas = sequential.look_alphas(POLICY["rounds"], 0.95, "obf")
    want = [1 - alphas[sequential.look_index(POLICY["rounds"], int(n))] for n in star["n_seeds"]]
    assert len(star) and star["interval_level"].tolist() == pytest.approx(want)
    assert star["n_seeds"].max() == 3
    # the last round's ledger is the final one (same tables, same code)
    last = _records(results)[-1]
    by_round = {(c["claim_id"], c["row_experiment"], c["norm"]): c["adjusted_verdict"]
                for c in last["claims"] if c["experiment"] == "star"}
    final = {(r.claim_id, r.experiment, r.norm): r.adjusted_verdict for r in star.itertuples()}
    assert by_round == final
    rep = pd.read_parquet(results / "tables" / "replication.parquet")
    assert sorted(rep.loc[rep["experiment"] == "star", "round"].unique()) == [0, 1]
    assert set(rep.loc[rep["experiment"] == "ts", "round"]) == {0}
    html = (results / "report.html").read_text()
    assert "Replication rounds" in html and "star: stopped after round 2 at 3 seeds" in html
    assert "Seeds added in round 2 to none, batchnorm." in html
    assert rep.loc[(rep["experiment"] == "star") & (rep["round"] == 0), "next_norms"].eq(
        "none,batchnorm").all()
    assert sorted(p.stem for p in (results / "figures" / "star").glob("*.png")) == sorted(FAMILIES)


def test_a_finished_study_reruns_nothing(project):
    assert harness.dry_run(project["project"]) == []


def test_the_plan_counts_the_jobs_the_workflow_ran(project):
    """Plan.job_counts (what the README's study table states) is what Snakemake ran: every rule,
    the rounds' jobs included."""
    from collections import Counter

    ran = Counter(j["rule"] for j in project["jobs"])
    assert _plan(project["project"]).job_counts() == dict(ran)


def test_more_rounds_train_and_measure_only_the_new_seeds(project):
    """Raising star's rounds to [2, 3, 4] after the study finished: the rounds are re-read at
    the new split (looks of three), and only seed 3's runs are trained and block 3 measured
    (whether round 0 skips look 1 or round 1 takes it)."""
    p = project["project"]
    harness.write_config(p / "config" / "config.yaml",
                         {**_config(p, [2, 3, 4]), "results": "results"})
    proc = harness.snakemake(p, "--cores", "2")
    jobs = harness.planned_jobs(proc.stdout + proc.stderr)
    records = _records(project["results"])
    # star reaches the new last look (4 seeds): from round 0 at once when its undecided rows
    # need 4 seeds or more (next_look 2, skipping look 1: bnstudy.replication.budget), else
    # through round 1
    first = records[0]["experiments"]["star"]
    assert first["continue"] and first["next_look"] in (1, 2), first
    assert first["next_look"] == 2 or records[1]["experiments"]["star"]["continue"], records
    assert records[-1]["experiments"]["star"]["look"] == 2, records[-1]["experiments"]["star"]
    trained = sorted((j["wildcards"]["experiment"], j["wildcards"]["norm"],
                      j["wildcards"]["block"]) for j in jobs if j["rule"] == "train")
    assert trained == [("star", "batchnorm", "3"), ("star", "none", "3")]
    measured = {(j["rule"], j["wildcards"]["experiment"], j["wildcards"]["block"])
                for j in jobs if j["rule"] in measures.REGISTRY}
    assert measured and {b for _, _, b in measured} == {"3"}, measured
    assert _plan(p).seeds("star") == [0, 1, 2, 3]
    assert layout.label_seeds("3") == [3]
    assert harness.dry_run(p) == []

