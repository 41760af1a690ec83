"""The schemas of a study's ``models`` and ``trainings`` entries, generated from the dataclasses
that parse them (:class:`bnstudy.networks.models.ModelConfig`,
:class:`bnstudy.train.config.TrainConfig`), so each key is declared once, beside its field;
:func:`bnstudy.config.loader.validate_schema` lays them into the schema file's entry shells.
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
    run's spec). Built anew per call: the defaults are put into configs as they are."""
    props, required = {}, []
    for f in fields(cls):
        mode = f.metadata.get("config")
        if "schema" not in f.metadata or mode not in (None, "required", "filled"):
            raise ValueError(f"{cls.__name__}.{f.name}: metadata {dict(f.metadata)!r}; allowed: "
                             "a 'schema' fragment, and 'config' required, filled or none")
        p = copy.deepcopy(dict(f.metadata["schema"]))
        if mode == "filled":
            p["default"] = plain(f.default if f.default is not MISSING else f.default_factory())
        required += [f.name] if mode == "required" else []
        props[f.name] = p | ({"description": f.metadata["doc"]} if f.metadata.get("doc") else {})
    return {"required": required, "properties": props, "additionalProperties": False}


def entry_schemas() -> dict[str, dict]:
    """The generated entry schemas: ``models`` (ModelConfig), ``trainings`` (TrainConfig)."""
    from bnstudy.networks.models import ModelConfig
    from bnstudy.train.config import TrainConfig

    return {"models": entry_schema(ModelConfig), "trainings": entry_schema(TrainConfig)}
