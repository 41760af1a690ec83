"""A run that reports success has made its targets (bnstudy.planning.targets, the Snakefile's
``onsuccess``): a run that Snakemake ends early with exit status 0 (snakemake#823, seen in the
SLURM test's cluster run: no claims table, figures or report) fails instead, naming the missing
files. Real Snakemake runs of a toy workflow check what ``workflow.dag.targetjobs`` holds: a
target rule's inputs, ``--until``'s jobs, files named on the command line."""

from __future__ import annotations

import re
from types import SimpleNamespace

import harness
import pytest

from bnstudy.planning import targets


def _job(tmp_path, output=(), input=()):
    return SimpleNamespace(output=[str(tmp_path / f) for f in output],
                           input=[tmp_path / f for f in input])


def test_missing_names_absent_outputs_and_a_target_rules_absent_inputs(tmp_path):
    (tmp_path / "made").write_text("")
    (tmp_path / "dir").mkdir()
    jobs = [_job(tmp_path, output=["made", "dir"]), _job(tmp_path, input=["made", "gone"]),
            _job(tmp_path, output=["also_gone", "made"], input=["gone_input_of_a_job"])]
    assert targets.missing(jobs) == sorted([str(tmp_path / "also_gone"),
                                            str(tmp_path / "gone")])
    assert targets.missing(jobs[:1]) == [] and targets.missing([]) == []


def test_a_run_without_its_targets_exits_1_naming_them(tmp_path, capsys):
    targets.exit_if_missing([_job(tmp_path, input=[])])  # nothing to make: no exit
    jobs = [_job(tmp_path, input=[f"f{i:02d}" for i in range(targets.SHOWN + 3)])]
    with pytest.raises(SystemExit) as e:
        targets.exit_if_missing(jobs)
    assert e.value.code == 1
    err = capsys.readouterr().err
    assert f"without making {targets.SHOWN + 3} of the run's target files" in err
    assert str(tmp_path / "f00") in err and str(tmp_path / "f12") not in err
    assert "and 3 more" in err and "Run the same command again" in err


def test_the_snakefile_checks_its_targets_when_a_run_succeeds():
    """After the fork server is stopped (a failing check must not leave it running)."""
    text = (harness.REPO / "Snakefile").read_text()
    block = re.search(r"^onsuccess:\n((?:    .*\n)+)", text, re.M)
    assert block, "the Snakefile has no onsuccess"
    assert block.group(1).split() == ["forkserver.stop()",
                                      "targets.exit_if_missing(workflow.dag.targetjobs)"]


TOY = """
import os

from bnstudy.planning import targets

rule all:
    input: "a", "b"

rule make_a:
    output: "a"
    shell: "touch {output}"

rule make_b:
    input: "a"
    output: "b"
    shell: "touch {output}"

onsuccess:  # --config drop=F: F taken away at the end, as a target the run never made
    if config.get("drop"):
        os.remove(config["drop"])
    targets.exit_if_missing(workflow.dag.targetjobs)
"""


@pytest.mark.workflow
def test_real_runs_check_the_targets_snakemake_was_given(tmp_path):
    toy = tmp_path / "toy"
    toy.mkdir()
    (toy / "Snakefile").write_text(TOY)
    # rule all's inputs: a run without one of them fails, naming it
    proc = harness.snakemake(toy, "--cores", "1", "--config", "drop=a", check=False)
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "without making 1 of the run's target files: a." in proc.stderr, proc.stderr[-3000:]
    harness.snakemake(toy, "--cores", "1")  # the same command again makes it
    assert (toy / "a").exists() and (toy / "b").exists()
    # --until's jobs are the targets: a run that stops there, as asked, succeeds
    for f in ("a", "b"):
        (toy / f).unlink()
    harness.snakemake(toy, "--cores", "1", "--until", "make_a")
    assert (toy / "a").exists() and not (toy / "b").exists()
    # a file named on the command line is the run's target, not rule all's inputs
    harness.snakemake(toy, "--cores", "1", "a")
    proc = harness.snakemake(toy, "a", "--cores", "1", "--forcerun", "make_a", "--config",
                             "drop=a", check=False)
    assert proc.returncode == 1 and "target files: a." in proc.stderr, proc.stderr[-3000:]
