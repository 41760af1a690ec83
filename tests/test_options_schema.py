"""Options are declared once: a measure's config section schema is derived from its options
class (bnstudy.options.Options.json_schema), and the schema file declares no measure."""

import json
from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path

import pytest
import yaml
from specs import sweep_config

from bnstudy import measures
from bnstudy.config import entries, measure_config, study, sweeps
from bnstudy.config.loader import ConfigError, read_yaml, validate_schema
from bnstudy.options import plain
from bnstudy.train import config as train_config
from bnstudy.train.config import TrainConfig

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = ROOT / "workflow/schemas/config.schema.yaml"


def test_the_schema_file_declares_no_measure_and_reads_strictly():
    doc = read_yaml(SCHEMA)  # the project's strict reader: duplicate keys are refused
    assert not set(measures.REGISTRY) & set(doc["properties"])


@pytest.mark.parametrize("name", sorted(measures.REGISTRY))
def test_a_measures_section_is_its_options_fields(name):
    cls = measures.REGISTRY[name].options
    section = measure_config.sections()[name]
    assert section["additionalProperties"] is False
    assert list(section["properties"]) == [f.name for f in fields(cls)]
    for f in fields(cls):
        default = f.default if f.default is not MISSING else f.default_factory()
        parsed = cls.parse({}).to_dict()[f.name]
        assert yaml.safe_dump(section["properties"][f.name]["default"]) == yaml.safe_dump(
            yaml.safe_load(yaml.safe_dump(plain(default)))), f.name
        assert plain(parsed) == plain(default), f.name
    assert ("default" in section) == cls.ALWAYS


def test_defaults_fill_a_configured_section_and_unknown_keys_are_named():
    cfg = study.load([ROOT / ".test/config.yaml"])
    cfg["smoothness"] = {"n_probes": 3}
    validate_schema(cfg, SCHEMA, measure_config.sections())
    assert cfg["smoothness"]["n_probes"] == 3 and cfg["smoothness"]["spacing"] == "log"
    cfg = study.load([ROOT / ".test/config.yaml"])
    cfg["smoothness"] = {"n_probe": 3}
    with pytest.raises(ConfigError, match="smoothness.*n_probe"):
        validate_schema(cfg, SCHEMA, measure_config.sections())
    cfg = study.load([ROOT / ".test/config.yaml"])
    cfg.pop("generalization", None)  # generalization always runs: filled with its defaults
    validate_schema(cfg, SCHEMA, measure_config.sections())
    assert cfg["generalization"] == {"bn_statistics": "running"}


def test_a_section_declared_twice_is_refused(tmp_path):
    doc = yaml.safe_load(SCHEMA.read_text())
    doc["properties"]["ics"] = {"type": "object"}
    path = tmp_path / "schema.yaml"
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(ValueError, match=r"\['ics'\] are derived"):
        validate_schema({}, path, measure_config.sections())


def test_dataset_kinds_come_from_the_data_registry_not_the_schema_file(monkeypatch):
    """A new dataset kind is declared where its generator is (bnstudy.data.GENERATORS and
    OPTIONS): the schema file names no kind, and the check refuses an unknown one by name."""
    from bnstudy import data

    doc = yaml.safe_load(SCHEMA.read_text())
    kind = doc["properties"]["datasets"]["additionalProperties"]["properties"]["kind"]
    assert "enum" not in kind and kind["type"] == "string"
    cfg = study.load([ROOT / ".test/config.yaml"])
    cfg["datasets"]["extra"] = {"kind": "ring2d"}
    with pytest.raises(ConfigError, match=r"datasets\.extra\.kind.*'ring2d'.*star2d"):
        validate_schema(cfg, SCHEMA, measure_config.sections(), data.kinds())
    monkeypatch.setitem(data.GENERATORS, "ring2d", data.GENERATORS["star2d"])
    monkeypatch.setitem(data.OPTIONS, "ring2d", data.OPTIONS["star2d"])
    validate_schema(cfg, SCHEMA, measure_config.sections(), data.kinds())


# -- a model's and a training's keys: declared once, by ModelConfig's and TrainConfig's fields ---

FILLED = {"trainings": {"momentum": 0.0, "weight_decay": 0.0, "batch_size": 64,
                        "eval_every": 50, "checkpoints": [0]},
          "models": {"norm_options": {}}}


@pytest.mark.parametrize("section, cls, required", [
    ("trainings", "bnstudy.train.config.TrainConfig", ["lr", "steps"]),
    ("models", "bnstudy.networks.models.ModelConfig", [])])  # arch: unless from (the rule)
def test_the_schema_file_declares_no_entry_key_and_the_class_declares_each(section, cls, required):
    """The file keeps the entry's shell; the keys, required ones and filled-in defaults are
    generated from the class's fields, the defaults exactly those the file used to write (a
    default written into every entry would change every existing run's spec)."""
    import importlib

    module, name = cls.rsplit(".", 1)
    cls = getattr(importlib.import_module(module), name)
    shell = read_yaml(SCHEMA)["properties"][section]["additionalProperties"]
    assert not {"properties", "required"} & set(shell)
    entry = entries.entry_schemas()[section]
    assert list(entry["properties"]) == [f.metadata.get("key", f.name) for f in fields(cls)]
    if section == "models":  # arch is required unless the entry names a user's model
        assert entry["then"] == {"required": ["arch"]} and list(entry)[:2] == ["if", "then"]
    assert entry["required"] == required and entry["additionalProperties"] is False
    defaults = {k: p["default"] for k, p in entry["properties"].items() if "default" in p}
    assert json.dumps(defaults) == json.dumps(FILLED[section])  # 0.0 stays a float, 64 an int
    assert entries.entry_schemas()[section] is not entry  # fresh defaults for every check


def test_the_generated_enums_are_the_registries():
    from bnstudy.networks import archs
    from bnstudy.train import precision, schedules

    model = entries.entry_schemas()["models"]["properties"]
    train = entries.entry_schemas()["trainings"]["properties"]
    assert model["arch"]["enum"] == list(archs.ARCHS) and model["init"]["enum"] == list(archs.INITS)
    assert train["lr_schedule"]["enum"] == list(schedules.KINDS)
    assert train["precision"]["enum"] == list(precision.PRECISIONS)


@dataclass(frozen=True)
class _Smoothed(TrainConfig):
    label_smoothing: float = field(default=0.0, metadata={
        "schema": {"type": "number", "minimum": 0, "exclusiveMaximum": 1},
        "doc": "a test key", "config": "filled"})


def _checked(cfg: dict, schema=SCHEMA) -> dict:
    return validate_schema(cfg, schema, measure_config.sections())


def _with_training(**training) -> dict:
    cfg = study.load([ROOT / ".test/config.yaml"])
    cfg["trainings"] = {"t": {"lr": 0.1, "steps": 5, **training}}
    return cfg


def test_a_field_added_to_a_subclass_is_a_key_of_the_schema_and_the_sweeps(monkeypatch):
    """The dataclass is the single source: a field added to it (here, to a subclass put in its
    place) is checked, filled in and sweepable with no edit anywhere else."""
    with pytest.raises(ConfigError, match=r"trainings\.t.*unknown key\(s\) \['label_smoothing'\]"):
        _checked(_with_training(label_smoothing=0.1))
    sweep = sweep_config(trainings={"t": {"lr": 0.1, "steps": 5,
                                          "sweep": {"label_smoothing": [0.0, 0.1]}}})
    with pytest.raises(ConfigError, match=r"axis 'label_smoothing'.*not an option"):
        sweeps.expand(sweep)
    entry = entries.entry_schema(_Smoothed)
    assert list(entry["properties"])[-1] == "label_smoothing"
    assert entry["properties"]["label_smoothing"] == {
        "type": "number", "minimum": 0, "exclusiveMaximum": 1, "default": 0.0,
        "description": "a test key"}
    monkeypatch.setattr(train_config, "TrainConfig", _Smoothed)
    cfg = _checked(_with_training())
    assert cfg["trainings"]["t"]["label_smoothing"] == 0.0
    with pytest.raises(ConfigError, match=r"trainings\.t\.label_smoothing: got 1; allowed: a "
                                          r"number < 1"):
        _checked(_with_training(label_smoothing=1))
    assert list(sweeps.expand(sweep)["trainings"]) == ["t_label_smoothing0", "t_label_smoothing0p1"]


def test_a_field_without_a_schema_or_with_a_bad_mode_is_refused():
    @dataclass(frozen=True)
    class Bare(TrainConfig):
        extra: int = 0

    with pytest.raises(ValueError, match=r"Bare\.extra: metadata \{\}; allowed: a 'schema'"):
        entries.entry_schema(Bare)

    @dataclass(frozen=True)
    class Odd(TrainConfig):
        extra: int = field(default=0, metadata={"schema": {}, "config": "always"})

    with pytest.raises(ValueError, match=r"Odd\.extra: .*'always'.*required, filled or none"):
        entries.entry_schema(Odd)


def test_entry_keys_declared_in_the_schema_file_too_are_refused(tmp_path):
    doc = yaml.safe_load(SCHEMA.read_text())
    doc["properties"]["trainings"]["additionalProperties"]["properties"] = {"lr": {}}
    path = tmp_path / "schema.yaml"
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(ValueError, match=r"trainings entries' keys are generated"):
        _checked(_with_training(), path)


def test_of_two_errors_at_one_entry_the_first_keyword_is_reported_as_before():
    """The keyword order of the old file entries is kept (jsonschema reports the first of two
    errors at one place): a training's unknown key before its missing lr, a model's missing
    arch before its unknown key."""
    cfg = _with_training(stpes=3)
    del cfg["trainings"]["t"]["lr"]
    with pytest.raises(ConfigError, match=r"trainings\.t: unknown key\(s\) \['stpes'\]"):
        _checked(cfg)
    cfg = _with_training()
    cfg["models"] = {"m": {"depth": 2, "dpth": 2}}
    with pytest.raises(ConfigError, match=r"models\.m: 'arch' is a required property"):
        _checked(cfg)
