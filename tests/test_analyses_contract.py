"""Analyses follow one contract (issue 21): each declares its options once, as an ``Options``
class whose errors name ``analyses.<name>.<key>``, and is found by discovery, as measures are.

The defaults and ranges below are written out by hand: they are those of the hand-written
``parse_options`` the ``dannemann`` analysis had before, so a changed default or a dropped
check fails here rather than silently changing the study's numbers.
"""

from __future__ import annotations

import copy
import math
import subprocess
import sys
import textwrap
import types
from dataclasses import dataclass, fields
from typing import ClassVar

import pandas as pd
import pytest
from harness import tiny_config

from bnstudy import analyses, options
from bnstudy.analyses import dannemann
from bnstudy.cli import main as cli
from bnstudy.config import loader, study

OLD_DEFAULTS = {"n_inits": 8, "steps": 10000, "steps_plain": 3000, "lr": 0.1, "lr_plain": 0.025,
                "seed": 0, "eps": 1e-12, "init_std": 3.0, "record_every": 20, "n_angles": 3600,
                "fd_step": 1e-6}
INT_MINIMUMS = {"n_inits": 0, "steps": 1, "steps_plain": 1, "seed": 0, "record_every": 1,
                "n_angles": 16}
POSITIVE = ("lr", "lr_plain", "eps", "init_std", "fd_step")
# (key, bad value, the words its error must hold after "analyses.dannemann.<key>=")
OUT_OF_RANGE = [*((k, low - 1, f"need a value >= {low}") for k, low in INT_MINIMUMS.items()),
                *((k, v, "need a finite number > 0")
                  for k in POSITIVE for v in (0, -1.0, math.inf))]
WRONG_TYPE = [*((k, v, "need an integer") for k in INT_MINIMUMS for v in (1.5, True, "3")),
              *((k, v, "need a number") for k in POSITIVE for v in (True, "0.1", math.nan))]


def test_defaults_are_those_of_before():
    assert dannemann.Options.parse(None).to_dict() == OLD_DEFAULTS
    assert dannemann.Options.parse({}).to_dict() == OLD_DEFAULTS
    assert [f.name for f in fields(dannemann.Options)] == list(OLD_DEFAULTS)
    assert all(f.metadata.get("doc") for f in fields(dannemann.Options))  # documented fields


def test_every_option_has_a_range_case():
    assert {k for k, _, _ in OUT_OF_RANGE} == set(OLD_DEFAULTS)
    assert {k for k, _, _ in WRONG_TYPE} == set(OLD_DEFAULTS)


@pytest.mark.parametrize("key, value, why", OUT_OF_RANGE + WRONG_TYPE,
                         ids=[f"{k}={v!r}" for k, v, _ in OUT_OF_RANGE + WRONG_TYPE])
def test_a_bad_value_is_refused_naming_key_value_and_what_is_valid(key, value, why):
    with pytest.raises(ValueError) as err:
        dannemann.Options.parse({key: value})
    shown = repr(float(value) if key in POSITIVE and type(value) is int else value)
    assert str(err.value) == f"analyses.dannemann.{key}={shown}: {why}"


@pytest.mark.parametrize("key, low", INT_MINIMUMS.items())
def test_the_bounds_themselves_are_valid(key, low):
    assert getattr(dannemann.Options.parse({key: low}), key) == low


def test_integers_are_accepted_for_floats_and_become_floats():
    o = dannemann.Options.parse({"lr": 1, "init_std": 2})
    assert o.lr == 1.0 and type(o.lr) is float and type(o.init_std) is float


def test_an_unknown_key_is_refused_with_the_valid_keys():
    with pytest.raises(ValueError) as err:
        dannemann.Options.parse({"stepz": 3})
    assert str(err.value) == (f"unknown analyses.dannemann option(s) ['stepz']; "
                              f"valid: {list(OLD_DEFAULTS)}")
    with pytest.raises(ValueError, match="analyses.dannemann options must be a mapping"):
        dannemann.Options.parse([1, 2])


def test_the_config_check_parses_each_entry_with_its_options(tmp_path):
    cfg = tiny_config()
    cfg["results"] = str(tmp_path / "results")
    cfg["results_anywhere"] = True  # a tmp folder, outside the working directory
    cfg["analyses"] = {"dannemann": {"lr_plain": math.inf}}
    # infinities are refused for every number of a config, before the analysis's own checks
    with pytest.raises(loader.ConfigError,
                       match=r"^analyses.dannemann.lr_plain: got inf; allowed: a finite number"):
        study.check(copy.deepcopy(cfg), local=False)
    cfg["analyses"] = {"dannemann": {"n_inits": 3}}
    assert study.check(cfg, local=False)["analyses"] == {"dannemann": {"n_inits": 3}}


# -- discovery ----------------------------------------------------------------------------------

def _analysis_module(name: str, drop: tuple = (), **overrides) -> types.ModuleType:
    """A throwaway analysis module: one option, rows that echo it and the options' type;
    ``drop``: contract names it lacks, ``overrides``: names set otherwise."""
    @dataclass(frozen=True)
    class Opts(options.Options):
        SECTION: ClassVar[str] = f"analyses.{name}"
        n: int = options.at_least(2, 1, doc="rows")

    def run(o):
        return [{"i": i, "typed": isinstance(o, Opts)} for i in range(o.n)]

    mod = types.ModuleType(f"bnstudy.analyses.{name}")
    mod.NAME, mod.Options, mod.run = name, Opts, run
    for k, v in overrides.items():
        setattr(mod, k, v)
    for k in drop:
        delattr(mod, k)
    return mod


def test_the_package_s_modules_are_discovered():
    assert set(analyses.REGISTRY) == {"dannemann"}
    assert [m.__name__ for m in analyses._modules()] == ["bnstudy.analyses.dannemann"]
    assert analyses._discover() == analyses.REGISTRY


def test_a_module_file_dropped_into_the_package_is_discovered(tmp_path, monkeypatch):
    (tmp_path / "echo_rows.py").write_text(textwrap.dedent('''
        """A throwaway analysis."""
        from dataclasses import dataclass
        from typing import ClassVar
        from bnstudy import options
        NAME = "echo_rows"
        @dataclass(frozen=True)
        class Options(options.Options):
            SECTION: ClassVar[str] = "analyses.echo_rows"
            n: int = options.at_least(2, 1, doc="rows")
        def run(o):
            return [{"i": i} for i in range(o.n)]
    '''))
    monkeypatch.setattr(analyses, "__path__", [*analyses.__path__, str(tmp_path)])
    monkeypatch.delitem(sys.modules, "bnstudy.analyses.echo_rows", raising=False)
    try:
        found = analyses._discover()
    finally:
        sys.modules.pop("bnstudy.analyses.echo_rows", None)
    assert set(found) == {"dannemann", "echo_rows"}
    a = found["echo_rows"]
    assert a.run(a.options.parse({"n": 3})) == [{"i": 0}, {"i": 1}, {"i": 2}]


def test_a_discovered_analysis_is_checked_and_run_by_the_config_check_and_cli(tmp_path,
                                                                              monkeypatch):
    mod = _analysis_module("echo")
    found = analyses._discover([dannemann, mod])
    monkeypatch.setattr(analyses, "REGISTRY", found)
    cfg = tiny_config()
    cfg["results"] = str(tmp_path / "results")
    cfg["results_anywhere"] = True  # a tmp folder, outside the working directory
    cfg["analyses"] = {"echo": {"n": 0}}
    with pytest.raises(loader.ConfigError, match=r"analyses.echo.n=0: need a value >= 1"):
        study.check(cfg, local=False)
    out = tmp_path / "echo.parquet"
    assert cli.main(["analysis", "echo", "--options", '{"n": 3}', "--out", str(out)]) == 0
    assert pd.read_parquet(out).to_dict("list") == {"i": [0, 1, 2], "typed": [True] * 3}
    assert cli.main(["analysis", "echo", "--options", '{"m": 3}', "--out", str(out)]) == 2


@pytest.mark.parametrize("change, words", [
    ({"drop": ("run",)}, "lacks ['run'] of the contract ['NAME', 'Options', 'run']"),
    ({"Options": dict}, "Options must derive from bnstudy.options.Options"),
    ({"NAME": "other"}, "Options.SECTION is 'analyses.thing', need 'analyses.other'"),
])
def test_a_module_that_breaks_the_contract_is_named(change, words):
    with pytest.raises(TypeError) as err:
        analyses._discover([_analysis_module("thing", **change)])
    assert "bnstudy.analyses.thing" in str(err.value) and words in str(err.value)


def test_two_modules_with_one_name_are_refused():
    with pytest.raises(TypeError, match="'echo' is defined by both"):
        analyses._discover([_analysis_module("echo"), _analysis_module("echo")])


def test_importing_the_registry_does_not_import_torch():
    code = ("import sys, bnstudy.analyses as a; assert a.REGISTRY; "
            "assert 'torch' not in sys.modules, 'torch imported'")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
