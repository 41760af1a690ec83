"""bnstudy.planning.plan and bnstudy.planning.codeversion: the workflow's jobs and what each is
given, without
Snakemake (the workflow tests check the same through real runs)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bnstudy import measures
from bnstudy.config import study
from bnstudy.planning import codeversion, plan
from bnstudy.tables import layout

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def default():
    """The default study without its replication policies (the rounds tests add their own:
    a plan with policies reads round files)."""
    cfg = study.check(study.load([ROOT / "config/config.yaml"]), local=False)
    for x in cfg["experiments"].values():
        x.pop("replication", None)
    cfg.pop("replication", None)
    return plan.Plan(cfg)


@pytest.fixture(scope="module")
def luo():
    """The luo study without its replication budgets (a plan with policies reads round
    files)."""
    cfg = study.check(study.load([ROOT / "config/studies/luo.yaml"]), local=False)
    for x in cfg["experiments"].values():
        x.pop("replication", None)
    return plan.Plan(cfg)


def test_one_measure_job_per_block_of_an_experiments_seeds(default):
    cfg = default.config
    for m in default.measures:
        exps = default.measure_experiments(m)
        assert exps and set(exps) <= set(cfg["experiments"])
        for e in exps:
            kind = cfg["datasets"][cfg["experiments"][e]["dataset"]]["kind"]
            assert measures.REGISTRY[m].applies_to(kind)
            n = len(cfg["experiments"][e]["norms"]) * len(cfg["experiments"][e]["seeds"])
            for block in default.blocks(e):
                label = layout.seeds_label(block)
                files = default.checkpoints(e, label)
                assert len(files) == n * len(block) // len(cfg["experiments"][e]["seeds"])
                assert all(p.endswith("checkpoints.pt") for p in files)
        outs = default.measure_outputs(m)
        assert list(outs) == list(measures.REGISTRY[m].tables)
        assert all(p.endswith(f"runs/{{experiment}}/seeds{{block}}/{t}.parquet")
                   for t, p in outs.items())
    # teacher_student applies only to teacher-student data
    assert all(default.dataset_kind(e) == "teacher_student"
               for e in default.measure_experiments("teacher_student"))


def test_an_experiments_measures_list_restricts_them(default):
    cfg = json.loads(json.dumps(default.config))
    e = next(iter(cfg["experiments"]))
    cfg["experiments"][e]["measures"] = ["generalization"]
    p = plan.Plan(cfg)
    assert p.experiment_measures(e) == ["generalization"]
    assert e not in p.measure_experiments("ics")


def test_tables_and_their_parts(default):
    assert default.tables[0] == plan.HISTORY
    assert default.table_level(plan.HISTORY) == "run"
    assert len(default.table_inputs(plan.HISTORY)) == len(default.runs)
    for t, m in default.table_measure.items():
        assert default.table_level(t) == "experiment"
        assert default.table_inputs(t) == [
            layout.block_file(default.results, e, b, f"{t}.parquet")
            for e in default.measure_experiments(m) for b in default.blocks(e)]
        assert sorted(json.loads(default.table_grid(t))) == sorted(default.measure_experiments(m))


def test_sweep_axes_travel_in_the_grid(luo):
    grid = json.loads(luo.table_grid(plan.HISTORY))
    ts = {e: g for e, g in grid.items() if not e.startswith(("resnet18_", "cnn"))}
    assert len(ts) == 408 and all(set(g["axes"]) >= {"alpha", "data_seed"} for g in ts.values())
    assert grid["resnet18_m1024"]["axes"] == {"regime": "m1024"}
    assert "axes" not in grid["cnn"]  # not swept


def test_run_spec_holds_only_this_runs_normalizer_options(default):
    cfg = json.loads(json.dumps(default.config))
    e, x = next(iter(cfg["experiments"].items()))
    cfg["models"][x["model"]]["norm_options"] = {"ghost_batchnorm": {"ghost_batch_size": 8},
                                                 x["norms"][0]: {"eps": 1e-3}}
    spec = json.loads(plan.Plan(cfg).run_spec(e, x["norms"][0], 0))
    assert spec["model_config"]["norm_options"] == {x["norms"][0]: {"eps": 1e-3}}
    assert spec["seed"] == 0 and spec["experiment"] == e


def test_every_figure_family_drawn_has_figures(default):
    for name in default.figures:
        outs = default.figure_outputs(name)
        assert outs and all(p.endswith(f"{name}.png") for p in outs.values())
    assert set(default.all_figures()) <= set(default.final_outputs())


def test_plots_families_choose_the_figures_and_stay_out_of_their_jobs_params(default):
    """``plots.families`` draws those families only (of the ones the study has tables for);
    the figure jobs' options (their param) are the other plot settings, so that choosing
    families redraws no figure."""
    every = list(default.figures)
    chosen = [every[0], every[-1], "teacher_student_batch_size"]  # the last: no tables here
    cfg = json.loads(json.dumps(default.config))
    cfg["plots"] = {**cfg.get("plots", {}), "families": chosen}
    some = plan.Plan(cfg)
    assert list(some.figures) == [every[0], every[-1]]
    assert sorted(some.all_figures()) == sorted(
        p for n in (every[0], every[-1]) for p in default.figure_outputs(n).values())
    assert some.plot_options() == default.plot_options()
    assert "families" not in json.loads(some.plot_options())
    assert json.loads(default.plot_options()) == default.config.get("plots", {})


def test_results_path_is_normalised():
    cfg = study.check(study.load([ROOT / "config/config.yaml"]), local=False)
    cfg = {**cfg, "results": "out//x/"}
    assert plan.Plan(cfg).res("tables") == "out/x/tables"


def test_planning_imports_neither_torch_nor_matplotlib(default, tmp_path):
    """The planner (what common.smk runs) needs neither; the config check that precedes it
    builds every model once, with torch, so a bad architecture fails before any job."""
    cfg = tmp_path / "flat.json"
    cfg.write_text(json.dumps(default.config))
    code = ("import json, sys; from bnstudy.planning import plan; "
            f"p = plan.Plan(json.load(open({str(cfg)!r}))); "
            "p.final_outputs(); [p.measure_code(m) for m in p.measures]; "
            "print(sorted(m for m in ('torch', 'matplotlib', 'seaborn') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]"


# -- codeversion ---------------------------------------------------------------------------------

def test_closure_follows_imports_inside_functions():
    """A measure's contract imports its compute module inside run(): it counts."""
    closure = codeversion.closure(["measures/ics/__init__.py"])
    assert "measures/ics/compute.py" in closure
    assert "networks/models.py" in closure and "train/loop.py" in closure
    assert "measures/smoothness/compute.py" not in closure


def test_code_version_changes_with_a_module_it_imports(tmp_path, monkeypatch):
    pkg = tmp_path / "bnstudy"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "entry.py").write_text("def f():\n    from bnstudy.sub import helper\n")
    (pkg / "sub" / "helper.py").write_text("X = 1\n")
    (pkg / "other.py").write_text("Y = 1\n")
    monkeypatch.setattr(codeversion, "SRC", pkg)
    codeversion.package_imports.cache_clear()
    before = codeversion.code_version(["entry.py"])
    (pkg / "other.py").write_text("Y = 2\n")
    assert codeversion.code_version(["entry.py"]) == before
    (pkg / "sub" / "helper.py").write_text("X = 2\n")
    codeversion.package_imports.cache_clear()
    assert codeversion.code_version(["entry.py"]) != before
    with pytest.raises(FileNotFoundError, match="nope.py"):
        codeversion.closure(["nope.py"])
    codeversion.package_imports.cache_clear()


# -- replication rounds ------------------------------------------------------------------------

def _replicated(default, **policies) -> plan.Plan:
    cfg = json.loads(json.dumps(default.config))
    for e, p in policies.items():
        cfg["experiments"][e]["replication"] = p
    return plan.Plan(cfg)


def _reader(records: dict):
    """A round reader over ``{k: {experiment: continue}}`` (continue: a bool, or the list of
    arms the next round trains); a missing round raises as Snakemake's checkpoint does (the
    test's stand-in: LookupError)."""
    def read(k):
        if k not in records:
            raise LookupError(f"round {k}")
        return {"experiments": {e: {"continue": bool(c), **({"norms": c} if isinstance(c, list)
                                                            else {})}
                                for e, c in records[k].items()}}
    return read


def test_rounds_walk_until_no_experiment_goes_on(default):
    p = _replicated(default, star={"rounds": [3, 6, 12]}, digits={"rounds": [3, 5]})
    assert p.max_rounds == 3 and p.runs[:3] == [("star", "none", 0), ("star", "none", 1),
                                                ("star", "none", 2)]
    p.use_rounds(_reader({}))
    with pytest.raises(LookupError):  # round 0 is due first
        p.looks()
    assert p.state(0) == {"star": 0, "digits": 0}
    p.use_rounds(_reader({0: {"star": True, "digits": False}}))
    with pytest.raises(LookupError):  # star goes on: round 1 is due
        p.looks()
    assert p.state(1) == {"star": 1, "digits": 0}
    grid = p.grid(["star", "digits", "dln"], p.state(1))
    assert grid["star"]["seeds"] == [0, 1, 2, 3, 4, 5]
    assert grid["star"]["blocks"] == [[0, 1, 2], [3, 4, 5]]
    assert grid["digits"]["blocks"] == [[0, 1, 2]] and grid["dln"]["blocks"] == [[0, 1, 2]]
    p.use_rounds(_reader({0: {"star": True, "digits": False}, 1: {"star": True},
                          2: {"star": True}}))
    assert p.looks() == {"star": 2, "digits": 0}  # the last planned round ends it
    assert [f.rsplit("/", 1)[1] for f in p.round_files()] == [
        "round0.json", "round1.json", "round2.json"]
    assert p.seeds("star") == list(range(12)) and p.seeds("digits") == [0, 1, 2]
    assert p.blocks("star") == [[0, 1, 2], [3, 4, 5], list(range(6, 12))]
    # a round's inputs are its state's parts; its arguments name the plans
    inputs = p.round_inputs(1)
    assert any("runs/star/seeds3-5/smoothness.parquet" in f for f in inputs)
    assert not any("seeds6-11" in f for f in inputs)
    args = p.job_arguments("round1")
    assert json.loads(args[args.index("--plans") + 1])["star"]["rounds"] == [3, 6, 12]
    assert [f.rsplit("/", 1)[1] for f in p.job_rounds("round1")] == ["round0.json"]
    assert len(p.job_rounds("aggregate_training")) == 3 and p.job_rounds("report") == []
    assert plan.REPLICATION + ".parquet" in " ".join(p.all_tables())


def test_a_round_trains_only_the_arms_its_undecided_rows_compare(default):
    # round 0 leaves rows over batchnorm vs none undecided: round 1's block has those two arms,
    # LayerNorm (read by no row) keeps its first three seeds
    p = _replicated(default, star={"rounds": [3, 6, 12]})
    p.use_rounds(_reader({0: {"star": ["none", "batchnorm"]}, 1: {"star": ["batchnorm"]},
                          2: {"star": False}}))
    assert p.block_norms("star") == [["none", "batchnorm", "layernorm"], ["none", "batchnorm"],
                                     ["batchnorm"]]
    grid = p.grid(["star"])["star"]
    runs = {tuple(f.split("/")[-3:-1]) for f in layout.grid_files("r", {"star": grid}, "x")}
    assert ("layernorm", "seed2") in runs and ("layernorm", "seed3") not in runs
    assert ("none", "seed5") in runs and ("none", "seed6") not in runs
    assert ("batchnorm", "seed11") in runs and len(runs) == 3 * 3 + 2 * 3 + 6
    assert p.block_grid("star", "3-5")["star"]["norms"] == ["none", "batchnorm"]
    assert p.block_grid("star", "6-11")["star"]["norms"] == ["batchnorm"]
    measured = p.checkpoints("star", "6-11")
    assert len(measured) == 6 and all("/batchnorm/" in f for f in measured)
    # the history table's parts follow the same runs; a round's inputs its state's
    history = p.table_inputs(plan.HISTORY)
    assert not any("star/layernorm/seed3/" in f for f in history)
    assert any("star/none/seed5/" in f for f in p.round_inputs(1))
    assert not any("star/layernorm/seed4/" in f for f in p.round_inputs(1))


def test_a_block_must_be_one_the_plan_can_ask_for(default):
    p = _replicated(default, star={"rounds": [3, 6]})
    p.use_rounds(_reader({0: {"star": True}}))
    assert p.block_grid("star", "3-5")["star"]["seeds"] == [3, 4, 5]
    assert p.block_grid("dln", "0-2")["dln"]["seeds"] == [0, 1, 2]
    for bad in ("0-5", "3-4", "7", "x"):
        with pytest.raises(ValueError, match="block"):
            p.block_grid("star", bad)


def test_a_study_without_policies_has_no_rounds(default):
    assert default.policies == {} and default.looks() == {} and default.round_files() == []
    assert not any("replication" in t for t in default.all_tables())
    assert default.job_rounds("aggregate_training") == []


def test_seed_labels_round_trip():
    for seeds in ([0], [0, 1, 2], [3, 4, 5, 9], [0, 2, 4], list(range(12, 24))):
        label = layout.seeds_label(seeds)
        assert layout.label_seeds(label) == seeds and "/" not in label
    assert layout.seeds_label([5, 3, 4, 0]) == "0_3-5"
    for bad in ("", "3-1", "1_0", "a", "1--2"):
        with pytest.raises(ValueError):
            layout.label_seeds(bad)


def test_no_figure_is_scheduled_for_a_linear_network(default):
    """A figure with nothing to show is not drawn: the DLN (linear) has no partition, so no
    partition-density figure is scheduled for it (its section's findings say so in one line);
    a slope-1 MLP is linear too."""
    for name in ("partition_density_steps", "partition_density_sets",
                 "partition_density_layers"):
        outputs = default.figure_outputs(name)
        assert "dln" not in outputs and {"star", "digits"} <= set(outputs), (name, outputs)
    assert "dln" not in default.figure_outputs("partition_density_maps")
    assert "dln" in default.figure_outputs("ics_gradient")  # it has ICS figures
    cfg = json.loads(json.dumps(default.config))
    cfg["models"]["mlp_star"]["slope"] = 1.0
    linear = plan.Plan(cfg)
    assert "star" not in linear.figure_outputs("partition_density_steps")
    assert "partition_density_maps" not in linear.figures


def test_figure_jobs_declare_their_vector_copies(default):
    cfg = json.loads(json.dumps(default.config))
    cfg["plots"] = {**cfg["plots"], "formats": ["pdf", "svg"]}
    p = plan.Plan(cfg)
    files = p.figure_files("training_curves")
    pngs = list(p.figure_outputs("training_curves").values())
    assert len(files) == 3 * len(pngs) and all(f[:-4] + ".pdf" in files for f in pngs)
    assert default.figure_files("training_curves") == list(
        default.figure_outputs("training_curves").values())
    assert p.all_figures() == default.all_figures()  # the report embeds the PNGs only


def test_the_claims_job_and_rounds_read_only_the_ledgers_tables(tmp_path):
    """Figure-only tables (boundaries, maps, activation quantiles, probe curves) are neither the
    claims job's inputs nor a replication round's: the largest tables of a study, read and
    sorted by every round before."""
    cfg = study.check(study.load([ROOT / "config/config.yaml"]), local=False)
    cfg["results"] = str(tmp_path / "results")
    cfg["results_anywhere"] = True  # a tmp folder, outside the working directory
    p = plan.Plan(cfg)
    stems = {Path(t).stem for t in p.ledger_tables()}
    assert {"ics", "smoothness", "partition_density", "training", "dannemann"} <= stems
    assert not stems & {"partition_boundaries", "partition_density_maps", "ics_activations",
                        "smoothness_probes", "bn_jitter_boundary"}
    assert {Path(t).stem for t in p.all_tables()} > stems
    parts = p.round_inputs(0)
    assert parts and not [f for f in parts if "boundar" in f or "_maps" in f
                          or "activations" in f or "probes" in f]
    assert any(f.endswith("/ics.parquet") for f in parts)
