"""The parts of the study schema declared where they belong, not in the schema file: each
measure's section (its options class), the dataset kinds (the data registry) and the keys of the
``models`` and ``trainings`` entries, generated from the dataclasses that parse them
(:class:`bnstudy.networks.models.ModelConfig`, :class:`bnstudy.train.config.TrainConfig`), so each
key is declared once, beside its field. :func:`complete` lays them into the schema file's
document; :func:`bnstudy.config.loader.validate_schema` validates against the result.
"""

from __future__ import annotations

import copy
from dataclasses import MISSING, fields

from bnstudy.options import plain


def entry_schema(cls) -> dict:
    """The schema of a section's entry generated from the dataclass ``cls`` (``trainings``:
    TrainConfig), so that each key is declared once, beside its field: metadata ``schema`` (its
    JSON-schema fragment), ``doc`` and ``config``: ``required``, ``filled`` (the default is
    written into the config) or absent (nothing written: a key added later changes no existing
    run's spec); ``key``, the config's name of the key when it is not the field's. Built anew per
    call: the defaults are put into configs as they are."""
    props, required = {}, []
    for f in fields(cls):
        mode = f.metadata.get("config")
        if "schema" not in f.metadata or mode not in (None, "required", "filled"):
            raise ValueError(f"{cls.__name__}.{f.name}: metadata {dict(f.metadata)!r}; allowed: "
                             "a 'schema' fragment, and 'config' required, filled or none")
        p = copy.deepcopy(dict(f.metadata["schema"]))
        if mode == "filled":
            p["default"] = plain(f.default if f.default is not MISSING else f.default_factory())
        name = f.metadata.get("key", f.name)  # the config's name (ModelConfig.from_: from)
        required += [name] if mode == "required" else []
        props[name] = p | ({"description": f.metadata["doc"]} if f.metadata.get("doc") else {})
    return {"required": required, "properties": props, "additionalProperties": False}


def entry_schemas() -> dict[str, dict]:
    """The generated entry schemas: ``models`` (ModelConfig), ``trainings`` (TrainConfig)."""
    from bnstudy.networks.models import ModelConfig
    from bnstudy.train.config import TrainConfig

    # a model entry names a built-in arch or a user's model (from): the rule first, so that a
    # missing arch is reported before an unknown key, as when arch was required
    models = {**ModelConfig.SCHEMA_RULES, **entry_schema(ModelConfig)}
    return {"models": models, "trainings": entry_schema(TrainConfig)}


def complete(schema_doc: dict, where: str, sections: dict[str, dict] | None = None,
             dataset_kinds: list[str] | None = None,
             entries: dict[str, dict] | None = None) -> dict:
    """``schema_doc`` (the schema file, read from ``where``) with the generated parts laid in:
    ``sections``, top-level sections derived from options classes (a measure's:
    :meth:`bnstudy.options.Options.json_schema`); ``dataset_kinds``
    (:func:`bnstudy.data.kinds`), the enum of ``datasets.<name>.kind``, whose type alone the
    file declares; ``entries``, section -> its entries' schema (default :func:`entry_schemas`),
    laid into the file's entry shell (whose keys keep their place: of two errors at one entry,
    the earlier keyword's is reported). A part the file declares too is refused."""
    clash = sorted(set(sections or {}) & set(schema_doc["properties"]))
    if clash:
        raise ValueError(f"{where}: sections {clash} are derived from their options classes "
                         "and must not be declared in the schema file too")
    schema_doc["properties"].update(sections or {})
    if dataset_kinds is not None:
        kind = schema_doc["properties"]["datasets"]["additionalProperties"]["properties"]["kind"]
        kind["enum"] = sorted(dataset_kinds)
    for section, entry in (entry_schemas() if entries is None else entries).items():
        shell = schema_doc["properties"][section]["additionalProperties"]
        if {"properties", "required"} & set(shell):
            raise ValueError(f"{where}: {section} entries' keys are generated from their "
                             "dataclass and must not be declared in the schema file too")
        shell.update(entry)
    return schema_doc
