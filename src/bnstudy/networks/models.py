"""Models built from a small typed config, with the normalizer injected.

Every hidden layer is a :class:`Block`: ``linear/conv -> normalizer -> activation``. Measures find
the blocks with :func:`blocks` and hook ``block.preact`` (its output is the pre-activation that
the activation folds: the normalizer's output, plus the skip in a residual block's second block)
or ``block.linear`` (its input is the layer's input).

Architectures:

- ``mlp``: ``depth`` hidden blocks of ``width`` units with leaky-ReLU of slope ``slope``
  (0 gives ReLU), then a linear head.
- ``dln``: Santurkar's deep linear network: ``depth`` square linear maps in all (``depth - 1``
  blocks with identity activation, then the head), no biases.
- ``vgg``: VGG-style 3x3 conv blocks; ``channels`` lists the conv widths with ``"M"`` for a 2x2
  max-pool, scaled by ``width_mult``; global average pooling then a linear classifier.
- ``unit``: Luo et al.'s single-layer student ``y = g(norm(w^T x))``: one block whose map has
  no bias, no head, and the normalizer's shift (BN's beta) held at 0 in a buffer, as Luo §4
  freezes it; ``g`` is the identity for ``slope: 1`` (the linear student), ReLU for 0.
  ``init_span: data`` starts its weight in the span of the training inputs (the row space of
  ``X``; :func:`bnstudy.networks.init.init_in_data_span`, applied by the training loop):
  gradient training never moves, and a normalizer with batch statistics never sees, the part
  outside it, which Luo §4's closed forms (minimum-norm, ridge and shrunk least squares) do
  not have. The weights' initialization: :mod:`bnstudy.networks.init`.
- ``cnn``: Luo et al. §5's Salimans-Kingma CNN, widths times ``width_mult``
  (:mod:`bnstudy.networks.cnn`).
- ``resnet9`` (Page's DAWNBench ResNet9), ``resnet18`` (the CIFAR ResNet18): first-stage width
  ``width`` (64 in the papers), the later stages 2, 4, 8 times it (:mod:`bnstudy.networks.resnet`;
  :mod:`bnstudy.networks.blocks` says what a layer of a residual block is).

A user's model, instead of ``arch``: ``from: my_models.py:build`` (or ``module:function``, or
an entry point of group "bnstudy.models") and ``options`` (its keyword arguments): the function
``build(norm, input_shape, out_dim, **options)`` gets the run's normalizer as the built-in
architectures do and returns a :class:`Net` of :class:`Block` s
(:mod:`bnstudy.networks.user_models`); ``init``, ``bias_init`` and ``bias_std`` then draw its
maps as a built-in's.

``dropout`` (default 0: none): the probability of a dropout layer after each hidden block
(``mlp``, ``dln``, ``vgg``, ``cnn``) or each residual block (``resnet9``, ``resnet18``; Luo's
Fig. 2g-h: 0.1); its mask is drawn from the training step like a stochastic normalizer's noise.
The dropout layers' seeds are drawn after the weights, so a model with dropout starts from the
same weights as the one without (same seed).

``slope: 1`` gives an identity activation (not a leaky ReLU of slope 1), so measures and hooks
see a linear unit.
"""

from __future__ import annotations

import math
from dataclasses import MISSING, asdict, dataclass, fields, replace

import torch
from torch import nn

from bnstudy.networks import normalizers, user_models
from bnstudy.networks.archs import (  # noqa: F401 (re-exported)
    ARCHS,
    BIAS_INITS,
    INIT_SPANS,
    INITS,
)
from bnstudy.networks.blocks import (  # noqa: F401 (re-exported)
    Block,
    Net,
    Residual,
    StepDropout,
    activation,
    blocks,
    maps,
    with_dropout,
)
from bnstudy.networks.cnn import cnn
from bnstudy.networks.init import initialize as _initialize
from bnstudy.networks.resnet import resnet9, resnet18
from bnstudy.options import config_key

BUILDERS = {"cnn": cnn, "resnet9": resnet9, "resnet18": resnet18}


_AT_LEAST_1 = {"type": "integer", "minimum": 1}


@dataclass(frozen=True)
class ModelConfig:
    """A model entry, typed. Its fields are the one declaration of a model's keys: the study
    config's ``models`` entry schema is generated from their metadata
    (:func:`bnstudy.config.entries.entry_schema`: ``schema`` the key's JSON-schema fragment,
    ``doc`` its description, ``config`` required or filled with the default), and sweeps take
    their keys from it. Only ``norm_options`` is filled in: a default written into every model
    would change every existing run's spec. Which keys an architecture reads is
    :mod:`bnstudy.networks.archs`' (checked by :mod:`bnstudy.config.model_checks`)."""

    arch: str | None = config_key(None, {"enum": list(ARCHS)},
                                  "the architecture (or from: a user's model)")
    # a user's model (bnstudy.networks.user_models): a function build(norm, input_shape,
    # out_dim, **options) returning a Net, named by import path or entry point, instead of arch
    from_: str | None = config_key(
        None, {"type": "string", "minLength": 1},
        "a user's model instead of arch: 'path/to/file.py:function', 'module:function' or an "
        "entry point of group bnstudy.models (EXTENDING.md, 'Your own model')", key="from")
    options: dict = config_key(
        MISSING,
        {"type": "object", "propertyNames": {"pattern": "^[A-Za-z_][A-Za-z0-9_]*$(?!\\n)"}},
        "from: the keyword arguments its function is called with", default_factory=dict)
    depth: int = config_key(4, _AT_LEAST_1, "hidden blocks (mlp; dln: maps in all)")
    width: int = config_key(64, _AT_LEAST_1,
                            "units per hidden block (mlp), first-stage width (resnets)")
    slope: float = config_key(0.0, {"type": "number", "minimum": 0},
                              "leaky-ReLU slope (0: ReLU, 1: the identity)")
    channels: tuple = config_key(
        (32, "M", 64, "M", 128),
        {"type": "array", "items": {"anyOf": [{"type": "integer", "minimum": 1}, {"const": "M"}]}},
        "vgg: conv widths, M for a 2x2 max-pool")
    width_mult: float = config_key(1.0, {"type": "number", "exclusiveMinimum": 0},
                                   "vgg, cnn: the conv widths' multiplier")
    dropout: float = config_key(0.0, {"type": "number", "minimum": 0, "exclusiveMaximum": 1},
                                "dropout after each hidden block (each residual block for resnets)")
    init: str = config_key("kaiming", {"enum": list(INITS)}, "the weights' initialization")
    bias_init: str = config_key("zero", {"enum": list(BIAS_INITS)}, "the biases' initialization")
    bias_std: float = config_key(1.0, {"type": "number", "minimum": 0},
                                 "bias_init random: the biases' standard deviation")
    init_span: str = config_key("all", {"enum": list(INIT_SPANS)},
                                "unit: data projects the initial weight onto the span of the "
                                "training inputs (all: no projection)")
    # options per normalizer name, e.g. {"ghost_batchnorm": {"ghost_batch_size": 8}}: one model
    # serves every normalizer of an experiment (`python -m bnstudy list normalizers` lists each
    # normalizer's options, declared in its own module)
    norm_options: dict = config_key(
        MISSING, {"type": "object", "propertyNames": {"pattern": "^[A-Za-z0-9_]+$(?!\\n)"},
               "additionalProperties": {"type": "object"}},
        "options per normalizer name; each normalizer declares, checks and documents its own "
        "(`python -m bnstudy list normalizers`), and the config check refuses an unknown "
        "option or a bad value through the registry (bnstudy.networks.models.ModelConfig)",
        "filled", default_factory=dict)

    # the schema's rule beside the generated keys (bnstudy.config.entries.entry_schemas)
    SCHEMA_RULES = {"if": {"not": {"required": ["from"]}}, "then": {"required": ["arch"]}}

    @classmethod
    def from_dict(cls, d: dict) -> ModelConfig:
        keys = {f.metadata.get("key", f.name): f.name for f in fields(cls)}
        unknown = sorted(set(d) - set(keys))
        if unknown:
            raise ValueError(f"unknown model option(s) {unknown}; valid: {sorted(keys)}")
        d = {keys[k]: v for k, v in d.items()}
        if "channels" in d:
            d["channels"] = tuple(d["channels"])
        cfg = cls(**d)
        cfg.validate()
        return cfg

    def validate(self) -> None:
        if self.from_ is not None:
            self._validate_from()
        elif self.arch not in ARCHS:
            raise ValueError(f"unknown model arch {self.arch!r}; valid choices: {', '.join(ARCHS)}")
        if self.init not in INITS:
            raise ValueError(f"unknown init {self.init!r}; valid choices: {', '.join(INITS)}")
        if self.init_span not in INIT_SPANS:
            raise ValueError(f"unknown init_span {self.init_span!r}; valid choices: "
                             f"{', '.join(INIT_SPANS)}")
        if self.init_span != "all" and self.arch != "unit":
            raise ValueError(f"model init_span={self.init_span!r} is for the unit student only "
                             f"(arch {self.arch!r}); allowed: all")
        if self.bias_init not in BIAS_INITS:
            raise ValueError(
                f"unknown bias_init {self.bias_init!r}; valid choices: {', '.join(BIAS_INITS)}"
            )
        for key in ("depth", "width"):
            v = getattr(self, key)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"model {key}={v!r}: allowed: an integer >= 1")
        if isinstance(self.dropout, bool) or not isinstance(self.dropout, (int, float)) \
                or not 0 <= self.dropout < 1:
            raise ValueError(f"model dropout={self.dropout!r}: allowed: a number in [0, 1)")
        if self.arch == "unit" and self.dropout:
            raise ValueError(f"model dropout={self.dropout!r}: the unit student has no hidden "
                             "block to drop out after; allowed: 0")
        for key, low in (("slope", 0.0), ("width_mult", 0.0), ("bias_std", 0.0)):
            v = getattr(self, key)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not low <= v < math.inf \
                    or (key == "width_mult" and v == 0):
                raise ValueError(f"model {key}={v!r}: allowed: a finite number "
                                 f"{'> 0' if key == 'width_mult' else '>= 0'}")
        for c in self.channels:
            if c != "M" and not (isinstance(c, int) and c > 0):
                raise ValueError(f"vgg channels entries must be positive ints or 'M', got {c!r}")
        unknown = sorted(set(self.norm_options) - set(normalizers.names()))
        if unknown:
            raise ValueError(f"norm_options names unknown normalizer(s) {unknown}; valid choices: "
                             f"{', '.join(normalizers.names())}")
        for name, opts in self.norm_options.items():
            if not isinstance(opts, dict):
                raise ValueError(f"norm_options[{name!r}] must map option names to values, "
                                 f"got {opts!r}")
            # the registry is the one declaration of a normalizer's options (the schema takes
            # any mapping): unknown keys and bad values are refused here, when a study config is
            # checked, not when the first run of that normalizer builds its model
            try:
                normalizers.get(name, opts)
            except ValueError as e:
                raise ValueError(f"norm_options.{name}: {e}") from None

    def _validate_from(self) -> None:
        if self.arch is not None:
            raise ValueError(f"arch={self.arch!r} and from={self.from_!r}: a model is a built-in "
                             "arch or a user's model (from); allowed: one of them")
        if not isinstance(self.from_, str) or not self.from_.strip():
            raise ValueError(f"from={self.from_!r}: allowed: 'path/to/file.py:function', "
                             "'module:function' or an entry point's name")
        if not isinstance(self.options, dict) or not all(
                isinstance(k, str) and k.isidentifier() for k in self.options):
            raise ValueError(f"options={self.options!r}: allowed: a mapping of keyword "
                             "arguments for the model's function")
        if self.dropout:
            raise ValueError(f"dropout={self.dropout!r}: a user's model places its own layers; "
                             "allowed: 0")

    @property
    def label(self) -> str:
        """The architecture in words: the built-in arch, or a user's model's target."""
        return self.arch if self.from_ is None else self.from_

    def normalizer(self, norm: str) -> normalizers.Normalizer:
        """Normalizer ``norm`` configured with its entry of ``norm_options`` (checked)."""
        return normalizers.get(norm, self.norm_options.get(norm))

    def to_dict(self) -> dict:
        d = asdict(self)
        d["channels"] = list(self.channels)
        d["from"] = d.pop("from_")
        return {k: v for k, v in d.items()
                if not (k in ("arch", "from") and v is None or k == "options" and not v)}


def _freeze_shift(norm: nn.Module) -> None:
    """Hold a normalizer's shift parameter (``bias``, BN's beta) at 0 as a buffer."""
    bias = norm._parameters.get("bias")
    if bias is not None:
        del norm._parameters["bias"]
        norm.register_buffer("bias", torch.zeros_like(bias.detach()))


def build_model(cfg: ModelConfig | dict, norm: str, input_shape, out_dim: int) -> Net:
    """Build a model; ``input_shape`` excludes the batch dimension (e.g. (2,) or (1, 8, 8))."""
    if isinstance(cfg, dict):
        cfg = ModelConfig.from_dict(cfg)
    nz = cfg.normalizer(norm)
    cfg = replace(cfg, **nz.init_overrides())  # e.g. zero_bias / random_bias
    d_in = int(math.prod(input_shape))
    layers: list[nn.Module] = []
    if cfg.from_ is not None:  # a user's model, its normalizer injected like a built-in's
        net = user_models.build(cfg.from_, nz, input_shape, out_dim, cfg.options)
    elif cfg.arch == "mlp":
        d = d_in
        for _ in range(cfg.depth):
            lin = nz.wrap(nn.Linear(d, cfg.width, bias=nz.linear_bias))
            layers.append(Block(lin, nz.layer(cfg.width, "fc"), activation(cfg.slope)))
            d = cfg.width
        head = nn.Linear(d, out_dim)
        net = Net(nn.Sequential(*with_dropout(layers, cfg.dropout)), head, input_shape, conv=False)
    elif cfg.arch == "dln":
        if d_in != out_dim:
            raise ValueError(f"dln needs square maps: input dim {d_in} != output dim {out_dim}")
        for _ in range(cfg.depth - 1):
            lin = nz.wrap(nn.Linear(d_in, d_in, bias=False))
            layers.append(Block(lin, nz.layer(d_in, "fc"), nn.Identity()))
        head = nn.Linear(d_in, out_dim, bias=False)
        net = Net(nn.Sequential(*with_dropout(layers, cfg.dropout)), head, input_shape, conv=False)
    elif cfg.arch == "unit":
        lin = nz.wrap(nn.Linear(d_in, out_dim, bias=False))
        block = Block(lin, nz.layer(out_dim, "fc"), activation(cfg.slope))
        _freeze_shift(block.norm)
        net = Net(nn.Sequential(block), nn.Identity(), input_shape, conv=False)
    elif cfg.arch in BUILDERS:
        net = BUILDERS[cfg.arch](cfg, nz, input_shape, out_dim)
    else:
        if len(input_shape) != 3:
            raise ValueError(f"vgg needs (C, H, W) inputs, got input shape {tuple(input_shape)}")
        c = input_shape[0]
        for spec in cfg.channels:
            if spec == "M":
                layers.append(nn.MaxPool2d(2))
                continue
            w = max(1, round(spec * cfg.width_mult))
            conv = nz.wrap(nn.Conv2d(c, w, 3, padding=1, bias=nz.linear_bias))
            layers.append(Block(conv, nz.layer(w, "conv"), activation(cfg.slope)))
            c = w
        head = nn.Linear(c, out_dim)
        net = Net(nn.Sequential(*with_dropout(layers, cfg.dropout)), head, input_shape, conv=True)
    _initialize(net, cfg)
    _seed_dropout(net)
    return net


@torch.no_grad()
def _seed_dropout(net: nn.Module) -> None:
    """Each dropout layer's mask seed, drawn from torch's global RNG after the weights."""
    for m in net.modules():
        if isinstance(m, StepDropout):
            m.noise_seed.fill_(int(torch.randint(0, 2**62, ())))
