"""The command line's own verbs: --version and list."""

from pathlib import Path

import pytest

from bnstudy import data, measures
from bnstudy.cli import args
from bnstudy.cli import main as cli
from bnstudy.networks import models, normalizers


def test_version(capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["--version"])
    assert e.value.code == 0 and capsys.readouterr().out.startswith("bnstudy ")


def test_list_names_every_registry_entry(capsys):
    assert cli.main(["list"]) == 0
    out = capsys.readouterr().out
    names = [*normalizers.REGISTRY, *measures.REGISTRY, *data.kinds(), *models.ARCHS]
    missing = [n for n in names if f"  {n} " not in out and not out.count(f"  {n}\n")]
    assert not missing
    assert "star2d" in out and "n_train" in out  # dataset kinds list their options


def test_list_one_registry(capsys):
    assert cli.main(["list", "normalizers"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("normalizers:") and "measures:" not in out
    with pytest.raises(SystemExit):
        cli.main(["list", "nonsense"])


def test_output_into_a_closed_pipe_ends_quietly():
    """`python -m bnstudy list | head -1`: no BrokenPipeError traceback."""
    import subprocess
    import sys

    r = subprocess.run(f"{sys.executable} -m bnstudy list all | head -1", shell=True,
                       capture_output=True, text=True, timeout=120)
    assert r.stdout.strip() == "normalizers:"
    assert "Traceback" not in r.stderr and "BrokenPipe" not in r.stderr, r.stderr


def _study(path, seeds):
    path.write_text("experiments:\n  e:\n    dataset: d\n    model: m\n    norms: [none]\n"
                    f"    seeds: {seeds}\n    training: t\n"
                    "datasets:\n  d: {kind: star2d, options: {n_train: 64, n_test: 32}}\n"
                    "models:\n  m: {arch: mlp, depth: 1, width: 4}\n"
                    "trainings:\n  t: {steps: 2, batch_size: 8, lr: 0.1, checkpoints: [0, 2]}\n")
    return str(path)


def test_check_checks_each_file_on_its_own_unless_merged(tmp_path, capsys):
    a, b = _study(tmp_path / "a.yaml", [0]), _study(tmp_path / "b.yaml", [0, 1, 2])
    assert cli.main(["check", a, b]) == 0
    out = [line for line in capsys.readouterr().out.splitlines() if "config OK" in line]
    assert out == [f"{a}: config OK (1 experiments, 1 training runs)",
                   f"{b}: config OK (1 experiments, 3 training runs)"]
    assert cli.main(["check", "--merge", a, b]) == 0
    assert capsys.readouterr().out.splitlines()[0] == (f"{a} + {b}: config OK (1 experiments, "
                                              "3 training runs)")


def test_check_states_how_long_the_study_should_take_here(tmp_path, capsys):
    """`check` says how long the study should take on this machine, from the cost model
    (bnstudy.planning.cost.on_this_machine): more seeds, more time."""
    import re

    took = {}
    for n in (1, 20):  # 20 seeds: two train blocks per arm (training_block 16)
        path = _study(tmp_path / f"s{n}.yaml", list(range(n)))
        assert cli.main(["check", path]) == 0
        line = capsys.readouterr().out.splitlines()[1]
        m = re.fullmatch(rf"{re.escape(path)}: should take at most about ([\d.]+) "
                         r"(s|min|h|days) on this machine \((\d+) CPU cores(, no GPU| and a GPU); "
                         r"`snakemake --cores \3`: (\d+) jobs, .* one at a time\), estimated "
                         r"from FLOP counts .*", line)
        assert m, line
        took[n] = (float(m[1]) * {"s": 1, "min": 60, "h": 3600, "days": 86400}[m[2]], int(m[5]))
    assert took[20][0] > took[1][0] and took[20][1] > took[1][1]


def test_help_says_how_to_run_a_study_people_verbs_first(capsys):
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    out = capsys.readouterr().out
    assert "snakemake --cores" in out and "python -m bnstudy check" in out
    listing = out[out.index("verbs ("):]
    rows = [line.split()[0] for line in listing.splitlines()[2:]
            if line.startswith("    ") and not line.startswith("     ")]
    assert rows[:len(args.USER_VERBS)] == list(args.USER_VERBS), rows
    for verb in ("train", "measure", "aggregate", "plot", "report", "claims"):
        assert verb in rows[len(args.USER_VERBS):]
    marked = [line for line in listing.splitlines() if "[plumbing]" in line]
    assert len(marked) == len(rows) - len(args.USER_VERBS)


def test_check_names_each_bad_file_and_fails(tmp_path, capsys):
    good = _study(tmp_path / "good.yaml", [0])
    bad = tmp_path / "bad.yaml"
    bad.write_text(open(good).read().replace("arch: mlp", "arch: mlpp"))
    assert cli.main(["check", good, str(bad)]) == 2
    captured = capsys.readouterr()
    assert f"{good}: config OK" in captured.out
    assert f"{bad}: error:" in captured.err and "mlpp" in captured.err
    assert "1 of 2 configs failed" in captured.err


def test_check_states_the_runs_replication_can_add(tmp_path, capsys):
    path = _study(tmp_path / "r.yaml", [0, 1])
    with open(path, "a") as fh:
        fh.write("replication: {rounds: [3, 6]}\n")
    assert cli.main(["check", path]) == 0
    assert capsys.readouterr().out.splitlines()[0] == (
        f"{path}: config OK (1 experiments, 3 training runs in the first round, at most 6 "
        "after the replication rounds)")
    bad = _study(tmp_path / "b.yaml", [0, 1, 2, 3])
    with open(bad, "a") as fh:
        fh.write("replication: {rounds: [3, 6]}\n")
    assert cli.main(["check", bad]) != 0
    err = capsys.readouterr().err
    assert "experiments.e.seeds: 4 seeds [0, 1, 2, 3] are more than the first" in err, err


def test_check_all_passes_every_shipped_study(capsys, monkeypatch):
    """`python -m bnstudy check --all` checks the default study and every study of
    config/studies (each on its own, so a broken `extends:` child such as a paper config whose
    parent lost an entry it names is caught here, in CI, not at its first dry run). As for a
    cluster run: the paper studies' real datasets are checked at their jobs, not here."""
    root = Path(__file__).resolve().parents[1]
    monkeypatch.chdir(root)
    assert cli.main(["check", "--all", "--cluster"]) == 0
    out = capsys.readouterr().out
    studies = sorted(p.relative_to(root).as_posix() for p in (root / "config/studies").glob(
        "*.yaml"))
    for name in ["config/config.yaml", *studies]:
        assert f"{name}: config OK" in out, name
