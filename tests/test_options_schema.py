"""Options are declared once: a measure's config section schema is derived from its options
class (bnstudy.options.Options.json_schema), and the schema file declares no measure."""

from dataclasses import MISSING, fields
from pathlib import Path

import pytest
import yaml

from bnstudy import measures
from bnstudy.config import study
from bnstudy.config.loader import ConfigError, read_yaml, validate_schema
from bnstudy.options import plain

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = ROOT / "workflow/schemas/config.schema.yaml"


def test_the_schema_file_declares_no_measure_and_reads_strictly():
    doc = read_yaml(SCHEMA)  # the project's strict reader: duplicate keys are refused
    assert not set(measures.REGISTRY) & set(doc["properties"])


@pytest.mark.parametrize("name", sorted(measures.REGISTRY))
def test_a_measures_section_is_its_options_fields(name):
    cls = measures.REGISTRY[name].options
    section = study.measure_sections()[name]
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
    validate_schema(cfg, SCHEMA, study.measure_sections())
    assert cfg["smoothness"]["n_probes"] == 3 and cfg["smoothness"]["spacing"] == "log"
    cfg = study.load([ROOT / ".test/config.yaml"])
    cfg["smoothness"] = {"n_probe": 3}
    with pytest.raises(ConfigError, match="smoothness.*n_probe"):
        validate_schema(cfg, SCHEMA, study.measure_sections())
    cfg = study.load([ROOT / ".test/config.yaml"])
    cfg.pop("generalization", None)  # generalization always runs: filled with its defaults
    validate_schema(cfg, SCHEMA, study.measure_sections())
    assert cfg["generalization"] == {"bn_statistics": "running"}


def test_a_section_declared_twice_is_refused(tmp_path):
    doc = yaml.safe_load(SCHEMA.read_text())
    doc["properties"]["ics"] = {"type": "object"}
    path = tmp_path / "schema.yaml"
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(ValueError, match=r"\['ics'\] are derived"):
        validate_schema({}, path, study.measure_sections())


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
        validate_schema(cfg, SCHEMA, study.measure_sections(), data.kinds())
    monkeypatch.setitem(data.GENERATORS, "ring2d", data.GENERATORS["star2d"])
    monkeypatch.setitem(data.OPTIONS, "ring2d", data.OPTIONS["star2d"])
    validate_schema(cfg, SCHEMA, study.measure_sections(), data.kinds())
