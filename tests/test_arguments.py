"""No command line grows with the study (issue 19): the arguments that do (an aggregate job's
run grid, a figure family's outputs, the report's config and figures) travel in a file written
by the workflow (``rule job_arguments``, :func:`bnstudy.planning.arguments.write_arguments`) and
named on the
command line as ``@FILE``. A 2,000-experiment sweep, whose grid alone is over Linux's 128 KiB
limit on one argument, runs its aggregate job on empty run outputs."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest
from harness import REPO, tiny_config, write_config

from bnstudy import io
from bnstudy.cli import main as cli
from bnstudy.config import study
from bnstudy.planning import arguments, plan
from bnstudy.tables import layout

MAX_ARG_STRLEN = 131072  # Linux: the longest single argument of a command


def sweep_study(tmp_path: Path, n: int) -> dict:
    cfg = tiny_config(results=str(tmp_path / "results"), results_anywhere=True)
    cfg["experiments"] = {"e": {"dataset": "star2d", "model": "mlp", "training": "sgd",
                                "norms": ["none"], "seeds": [0],
                                "sweep": {"v": {i: {} for i in range(n)}}}}
    return study.check(study.load([write_config(tmp_path / "big.yaml", cfg)]), local=False)


def test_a_2000_experiment_sweep_aggregates_from_an_argument_file(tmp_path):
    cfg = sweep_study(tmp_path, 2000)
    p = plan.Plan(cfg)
    assert len(p.experiments) == 2000
    args = p.job_arguments(f"aggregate_{plan.HISTORY}")
    assert args[0] == "--grid" and len(args[1]) > MAX_ARG_STRLEN  # too long for a command line
    args_file = p.arguments_file(f"aggregate_{plan.HISTORY}")
    arguments.write_arguments(args_file, args)
    # empty run outputs: an empty history table in every run's place, saying which run it is
    # (a run file is bound to its place: tables.binding)
    empty = pd.DataFrame({"experiment": pd.Series(dtype="str"), "norm": pd.Series(dtype="str"),
                          "seed": pd.Series(dtype="int64"), "step": pd.Series(dtype="int64"),
                          "loss": pd.Series(dtype="float64")})
    # (one provenance record, each file's place added: a record asks git twice)
    prov = io.provenance("0" * 16)
    for f in layout.grid_files(p.results, p.grid(p.experiments), "history.parquet"):
        e, n, s = Path(f).parts[-4:-1]
        place = {"experiment": e, "norm": n, "seed": int(s[4:])}
        io.write_table(empty, f, {**prov, "place": place})
    out = tmp_path / "results" / "tables" / "training.parquet"
    rc = cli.main(["aggregate", "--results", p.results, "--name", p.table_file(plan.HISTORY),
                   f"@{args_file}", "--level", "run", "--out", str(out)])
    assert rc == 0
    df = io.read_table(out)
    assert "v" in df.columns and len(df) == 0
    assert io.read_provenance(out)["inputs"] == 2000


def test_every_growing_argument_goes_through_a_file(tmp_path):
    p = plan.Plan(sweep_study(tmp_path, 3))
    assert p.argument_jobs[0] == f"aggregate_{plan.HISTORY}" and "report" in p.argument_jobs
    for job in p.argument_jobs:
        args = p.job_arguments(job)
        arguments.write_arguments(p.arguments_file(job), args, str(tmp_path / "logs" / job))
        assert Path(p.arguments_file(job)).read_text().splitlines() == args
        assert f"{len(args)} arguments" in (tmp_path / "logs" / job).read_text()
    with pytest.raises(ValueError, match="unknown job 'aggregate_nope'"):
        p.job_arguments("aggregate_nope")
    with pytest.raises(ValueError, match="line break"):
        arguments.write_arguments(str(tmp_path / "x.args"), ["a\nb"])


def test_no_rule_passes_a_growing_value_on_its_command_line():
    """The rules' shell commands take the study's grid, the figure outputs, the config and the
    figure list only as @FILE (a param computed from them would grow with the study; a measure
    job's grid is its one experiment's runs)."""
    text = "\n".join(p.read_text() for p in sorted((REPO / "workflow" / "rules").glob("*.smk")))
    for growing in ("get_table_grid", "get_figure_outs", "json.dumps(config, ",
                    "--config {params", "--figures {input", "--out {params"):
        assert growing not in text, growing
    for rule in ("aggregate", "plot", "report"):
        assert re.search(rf"python -m bnstudy {rule}\b[^\n]*\n?[^\n]*@{{input\.arguments:q}}",
                         text), rule
