"""The tests' warm Snakemake (:mod:`warm_snakemake`) runs as a fresh ``python -m snakemake`` does:
the same plan, output and exit status, in the project copy, with the copy's package."""

from __future__ import annotations

import subprocess

import harness
import pytest

pytestmark = pytest.mark.workflow


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    project = harness.copy_project(tmp_path_factory.mktemp("warm") / "project")
    # a mark only the copy's package carries: the Snakefile must import the copy, not the tree
    init = project / "src" / "bnstudy" / "__init__.py"
    init.write_text(init.read_text() + "\nprint('bnstudy of the copy', flush=True)\n")
    return project


@pytest.mark.parametrize("args", [("-n",), ("-n", "--config", "device=quantum")],
                         ids=["plan", "bad-config"])
def test_a_warm_run_is_a_fresh_run(project, args):
    warm = harness.snakemake(project, *args, check=False)
    fresh = harness.snakemake(project, *args, check=False, fresh=True)
    assert warm.returncode == fresh.returncode, (warm.stderr[-3000:], fresh.stderr[-3000:])
    assert (warm.returncode == 0) == (args == ("-n",))
    assert harness.job_keys(harness.planned_jobs(warm.stdout + warm.stderr)) == harness.job_keys(
        harness.planned_jobs(fresh.stdout + fresh.stderr))
    for proc in (warm, fresh):
        assert "bnstudy of the copy" in proc.stdout, proc.stdout[-2000:]
        assert proc.args[1:3] == ["-m", "snakemake"]
    if warm.returncode:
        error = next(line for line in fresh.stderr.splitlines() if "quantum" in line)
        assert error in warm.stderr, warm.stderr[-3000:]


def test_a_warm_run_past_its_timeout_is_stopped(project):
    with pytest.raises(subprocess.TimeoutExpired):
        harness.snakemake(project, "-n", timeout=0.05)
