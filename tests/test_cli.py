"""The command line's own verbs: --version and list."""

import pytest

from bnstudy import cli, data, measures
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
