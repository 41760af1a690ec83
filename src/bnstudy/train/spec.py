"""A training run's spec, typed.

The planner (:meth:`bnstudy.planning.plan.Plan.run_spec`) writes everything that determines a run as
JSON: its ids (experiment, dataset, model, norm, seed), the model's config and the training
setup. That JSON is parsed once, where it enters the package (the command line's ``--spec``, a
checkpoint file read back), into a :class:`RunSpec`: the normalizer name checked against the
registry, the model and training entries parsed into :class:`~bnstudy.networks.models.ModelConfig`
and :class:`~bnstudy.train.config.TrainConfig` (each with its checks), the seed an integer. The
rest of the package reads attributes (``spec.training.lr``, ``spec.model_config.arch``), never
dictionary keys.

``to_dict()`` gives the JSON form back unchanged: checkpoint files store it and provenance hashes
it, so files and hashes are those of the planner's dict.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

from bnstudy.networks import external, normalizers
from bnstudy.networks.models import ModelConfig
from bnstudy.train.config import TrainConfig

ID_KEYS = ("experiment", "dataset", "model", "norm", "seed")
KEYS = (*ID_KEYS, "model_config", "training")
# a user's normalizer: where it comes from (bnstudy.networks.external), only in its runs' specs
OPTIONAL = ("normalizer_from",)


@dataclass(frozen=True)
class RunSpec:
    experiment: str
    dataset: str
    model: str
    norm: str
    seed: int
    model_config: ModelConfig
    training: TrainConfig
    raw: dict = field(repr=False, compare=False)

    @classmethod
    def parse(cls, spec: RunSpec | dict, source: str = "run spec") -> RunSpec:
        """``spec`` checked and typed; a ValueError names ``source`` and the bad entry."""
        if isinstance(spec, RunSpec):
            return spec
        if not isinstance(spec, dict):
            raise ValueError(f"{source}: expected a mapping with keys {list(KEYS)}, "
                             f"got {type(spec).__name__}")
        missing = [k for k in KEYS if k not in spec]
        unknown = sorted(set(spec) - set(KEYS) - set(OPTIONAL))
        if missing or unknown:
            raise ValueError(f"{source}: missing keys {missing}, unknown keys {unknown}; "
                             f"a run spec has exactly {list(KEYS)}")
        for k in ("experiment", "dataset", "model", "norm"):
            if not isinstance(spec[k], str) or not spec[k]:
                raise ValueError(f"{source}: {k}={spec[k]!r}: allowed: a non-empty name")
        seed = spec["seed"]
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise ValueError(f"{source}: seed={seed!r}: allowed: an integer >= 0")
        for k in ("model_config", "training"):
            if not isinstance(spec[k], dict):
                raise ValueError(f"{source}: {k}={spec[k]!r}: allowed: a mapping of options")
        try:
            if "normalizer_from" in spec:  # a user's normalizer: registered in this process too
                external.register_normalizer(spec["norm"], spec["normalizer_from"])
            normalizers.get(spec["norm"])  # names the valid choices
            model_config = ModelConfig.from_dict(spec["model_config"])
            training = TrainConfig.from_dict(spec["training"])
        except ValueError as e:
            raise ValueError(f"{source}: {e}") from None
        return cls(spec["experiment"], spec["dataset"], spec["model"], spec["norm"], seed,
                   model_config, training, copy.deepcopy(spec))

    @property
    def ids(self) -> dict:
        """The run's identifying columns, as every table carries them."""
        return {k: getattr(self, k) for k in ID_KEYS}

    def to_dict(self) -> dict:
        """The JSON form the spec was parsed from."""
        return copy.deepcopy(self.raw)

    def replace(self, **changes) -> RunSpec:
        """The spec with some top-level entries replaced (parsed and checked again)."""
        return RunSpec.parse({**self.to_dict(), **changes})
