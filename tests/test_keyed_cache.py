"""The keyed cache of config checks and model sizes (bnstudy.keyed_cache): a second Snakemake
start of a study it checked before imports no torch and builds no model, and gets the same
config and the same job requests as a full check; every input of a value is in its key; what the
check reads of the machine is checked again on a hit; a failing config is never stored; a bad or
foreign entry is a miss.

The import checks run in fresh interpreters, since this test process has imported torch."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import harness
import pytest

from bnstudy import keyed_cache, model_size
from bnstudy.config import loader, study
from bnstudy.planning.plan import Plan


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    root = tmp_path / "cache"
    monkeypatch.setenv(keyed_cache.ENV, str(root))
    return root


def _tiny(tmp_path) -> dict:
    cfg = harness.tiny_config()
    cfg["results"] = str(tmp_path / "results")
    cfg["results_anywhere"] = True  # a tmp folder, outside the working directory
    return cfg


def _fresh(code: str, cache: Path) -> dict:
    """Run ``code`` (which prints one JSON line last) in a fresh interpreter with ``cache``."""
    env = {**os.environ, keyed_cache.ENV: str(cache)}
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                         text=True, timeout=300, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


CHECK_AND_PLAN = """
    import json, sys
    from bnstudy.config import study
    from bnstudy.planning.plan import Plan
    cfg = json.loads({cfg!r})
    study.check_cached(cfg, local=True)
    plan = Plan(cfg)
    requests = {{r: plan.job_resources(r, {{"experiment": "star", "norm": "batchnorm",
                                          "seed": "0", "block": "0-1"}})
                 for r in ("train", "smoothness", "partition_density")}}
    print(json.dumps({{"torch": "torch" in sys.modules, "config": cfg, "requests": requests}}))
"""


def test_a_second_start_imports_no_torch_and_gets_the_full_checks_config(tmp_path, cache):
    cfg = _tiny(tmp_path)
    code = CHECK_AND_PLAN.format(cfg=json.dumps(cfg))
    first, second = _fresh(code, cache), _fresh(code, cache)
    assert first["torch"] and not second["torch"]  # the first counted the models with torch
    full = study.check(json.loads(json.dumps(cfg)), local=True)
    assert keyed_cache._same(second["config"], json.loads(json.dumps(full)))
    assert second["config"] == first["config"] and second["requests"] == first["requests"]
    assert sorted(p.name for p in cache.iterdir()) == ["config-check", "model-size",
                                                        "norm-refresh"]


def test_every_input_of_a_value_is_in_its_key(monkeypatch):
    base = keyed_cache.key("k", {"a": 1})
    assert keyed_cache.key("k", {"a": 1}) == base
    assert keyed_cache.key("k", {"a": 1.0}) != base  # JSON writes 1 and 1.0 apart
    assert keyed_cache.key("other", {"a": 1}) != base
    monkeypatch.setattr(keyed_cache, "torch_version", lambda: "0.0.0")
    assert keyed_cache.key("k", {"a": 1}) != base
    monkeypatch.undo()
    monkeypatch.setattr(keyed_cache, "package_hash", lambda: "edited")
    assert keyed_cache.key("k", {"a": 1}) != base


def test_a_reordered_config_is_checked_into_its_own_order(tmp_path, cache):
    """The checked config keeps the file's order (the experiments' order is the order of each
    figure job's outputs, a param): a config whose experiments are reordered is another key,
    not the stored config of the old order (which would give one file two plans, by whether
    the cache holds the other order)."""
    cfg = _tiny(tmp_path)
    first = study.check_cached(json.loads(json.dumps(cfg)))
    cfg["experiments"] = dict(reversed(list(cfg["experiments"].items())))
    again = study.check_cached(json.loads(json.dumps(cfg)))
    assert list(again["experiments"]) == list(cfg["experiments"]) != list(first["experiments"])
    assert keyed_cache.key("k", {"a": 1, "b": 2}) != keyed_cache.key("k", {"b": 2, "a": 1})


def test_the_package_hash_follows_every_file(tmp_path):
    root = tmp_path / "pkg"
    (root / "sub" / "__pycache__").mkdir(parents=True)
    (root / "a.py").write_text("x = 1\n")
    (root / "sub" / "b.yaml").write_text("k: 1\n")

    def fresh(root):  # (as a new process reads it: the files' digests are read once per process)
        keyed_cache.file_digests.cache_clear()
        return keyed_cache.package_hash.__wrapped__(root)

    h = fresh(root)
    (root / "sub" / "__pycache__" / "a.cpython-311.pyc").write_bytes(b"\0")
    assert fresh(root) == h  # compiled files are no source
    (root / "sub" / "b.yaml").write_text("k: 2\n")
    assert fresh(root) != h
    (root / "sub" / "b.yaml").write_text("k: 1\n")
    (root / "c.py").write_text("")
    assert fresh(root) != h


def test_entries_round_trip_and_anything_else_is_a_miss(cache):
    k = keyed_cache.key("t", 1)
    assert keyed_cache.get("t", k) is None
    value = {"a": [1, 2.5, "x", None, True], "b": {"c": 0}}
    assert keyed_cache.put("t", k, value)
    assert keyed_cache._same(keyed_cache.get("t", k), value)
    path = cache / "t" / f"{k}.json"
    other = keyed_cache.key("t", 2)
    (cache / "t" / f"{other}.json").write_text(path.read_text())  # another key's entry
    assert keyed_cache.get("t", other) is None
    path.write_text('{"key": "' + k + '", "val')  # cut short
    assert keyed_cache.get("t", k) is None
    path.write_bytes(b"\xff\xfe")
    assert keyed_cache.get("t", k) is None
    # values JSON would change are not stored: a tuple, a NaN, a key that is no string
    for bad in ({"a": (1, 2)}, {"a": float("nan")}, {1: "a"}, {"a": object()}):
        assert not keyed_cache.put("t", keyed_cache.key("t", repr(bad)), bad)


def test_off_stores_nothing_and_an_unwritable_folder_is_no_error(tmp_path, monkeypatch):
    monkeypatch.setenv(keyed_cache.ENV, "off")
    assert keyed_cache.folder() is None and not keyed_cache.put("t", "k", 1)
    assert keyed_cache.get("t", "k") is None
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv(keyed_cache.ENV, str(blocker / "cache"))  # below a file
    assert not keyed_cache.put("t", "k", 1) and keyed_cache.get("t", "k") is None


def test_the_oldest_entries_go_past_the_cap(cache, monkeypatch):
    monkeypatch.setattr(keyed_cache, "MAX_ENTRIES", 3)
    keys = [keyed_cache.key("t", i) for i in range(5)]
    for i, k in enumerate(keys):
        assert keyed_cache.put("t", k, i)
        os.utime(cache / "t" / f"{k}.json", (i, i))
    kept = sorted(p.stem for p in (cache / "t").glob("*.json"))
    assert kept == sorted(keys[2:])


def test_a_hit_checks_the_machine_again(tmp_path, cache):
    cfg = _tiny(tmp_path)
    study.check_cached(json.loads(json.dumps(cfg)))
    assert len(list((cache / "config-check").iterdir())) == 1
    Path(cfg["results"]).write_text("a file where the results go")
    with pytest.raises(loader.ConfigError, match="is an existing file"):
        study.check_cached(json.loads(json.dumps(cfg)))


def test_a_failing_config_is_never_stored(tmp_path, cache):
    cfg = _tiny(tmp_path)
    cfg["trainings"]["sgd"]["batch_size"] = 10_000  # more than the training set
    for _ in range(2):
        with pytest.raises(loader.ConfigError, match="batch_size"):
            study.check_cached(json.loads(json.dumps(cfg)))
    assert not (cache / "config-check").exists() or not list((cache / "config-check").iterdir())


def test_cached_sizes_are_the_counted_ones(cache):
    entry = {"arch": "vgg", "channels": [8, "M", 16], "width_mult": 1.0}
    counted = model_size._count(entry, (3, 8, 8), 10)
    assert model_size.size(entry, (3, 8, 8), 10) == counted  # counted, stored
    assert model_size.size(entry, (3, 8, 8), 10) == counted  # read back
    assert len(list((cache / "model-size").iterdir())) == 1
    assert model_size.size(entry, (3, 16, 16), 10) != counted  # the shape is in the key
    for norm in ("batchnorm", "population_norm", "none"):
        assert model_size.refresh({}, norm) == model_size._refresh({}, norm)
        assert model_size.refresh({}, norm) == model_size._refresh({}, norm)


def test_the_plan_reads_the_same_requests_from_the_cache(tmp_path, cache):
    cfg = study.check(_tiny(tmp_path))
    wild = {"experiment": "star", "norm": "batchnorm", "seed": "0", "block": "0-1"}
    first = {r: Plan(cfg).job_resources(r, wild) for r in ("train", "ics")}
    assert len(list((cache / "model-size").iterdir())) == 1
    assert {r: Plan(cfg).job_resources(r, wild) for r in ("train", "ics")} == first


@pytest.mark.workflow
def test_a_second_snakemake_start_imports_no_torch(tmp_path, cache, monkeypatch):
    """A dry run twice: the second Snakemake process never imports torch (a ``sitecustomize``
    on its path records the first torch import with its stack)."""
    project = harness.copy_project(tmp_path / "project")
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(textwrap.dedent(f"""
        import os, sys, traceback
        class _Watch:
            def find_spec(self, name, path=None, target=None):
                if name == "torch" and any("snakemake" in a for a in sys.argv):
                    with open({str(tmp_path)!r} + f"/torch.{{os.getpid()}}", "w") as f:
                        f.write("".join(traceback.format_stack()))
                return None
        sys.meta_path.insert(0, _Watch())
    """))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        [str(hook), *filter(None, [os.environ.get("PYTHONPATH")])]))
    env = {keyed_cache.ENV: str(cache)}
    harness.snakemake(project, "-n", extra_env=env, fresh=True)  # (its sitecustomize)
    assert list(tmp_path.glob("torch.*"))  # the first start checked the models with torch
    for f in tmp_path.glob("torch.*"):
        f.unlink()
    harness.snakemake(project, "-n", extra_env=env, fresh=True)
    found = [f.read_text()[-1500:] for f in tmp_path.glob("torch.*")]
    assert not found, found


def test_an_edit_reparses_only_the_edited_module_of_the_import_graph(tmp_path, cache,
                                                                       monkeypatch):
    """The rules' code hashes read the package's import graph (bnstudy.planning.codeversion): a
    start after an edit of one module parses that module only and gets the graph a full parse
    gives; a module added (what an import resolves to may change) parses them all again."""
    from bnstudy.planning import codeversion

    pkg = tmp_path / "bnstudy"
    (pkg / "sub").mkdir(parents=True)
    files = {"__init__.py": "", "sub/__init__.py": "", "sub/helper.py": "X = 1\n",
             "entry.py": "def f():\n    from bnstudy.sub import helper\n",
             "other.py": "from bnstudy import entry\n"}
    for rel, text in files.items():
        (pkg / rel).write_text(text)
    monkeypatch.setattr(codeversion, "SRC", pkg)
    parsed = []
    real = codeversion._parse
    monkeypatch.setattr(codeversion, "_parse", lambda rel: parsed.append(rel) or real(rel))

    def start() -> dict:
        codeversion._graph.cache_clear()  # (a new Snakemake start)
        keyed_cache.file_digests.cache_clear()
        parsed.clear()
        return codeversion._graph(pkg)

    full = start()
    assert sorted(parsed) == sorted(files) and full["entry.py"] == ["sub/helper.py"]
    assert start() == full and parsed == []
    (pkg / "other.py").write_text("from bnstudy.sub import helper\n")
    again = start()
    assert parsed == ["other.py"] and again == {**full, "other.py": ["sub/helper.py"]}
    (pkg / "sub" / "more.py").write_text("")
    assert start() == {**again, "sub/more.py": []} and sorted(parsed) == sorted(
        [*files, "sub/more.py"])
    codeversion._graph.cache_clear()
    keyed_cache.file_digests.cache_clear()
