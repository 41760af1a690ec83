"""The normalizer registry's core: what a normalizer is (:class:`Normalizer`), the hook context
the trainer passes, and :func:`register` / :func:`get` (see :mod:`bnstudy.networks.normalizers`
for the contract and every registered entry; the entries live in the modules of this package
that define them)."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import torch
from torch import nn
from torch.nn.utils import parametrizations


@dataclass(frozen=True)
class HookContext:
    """What the trainer hands to normalizer hooks: the training set and run settings."""

    x: torch.Tensor  # training inputs, on the run's device
    y: torch.Tensor  # training targets
    task: str  # "classification" | "regression"
    batch_size: int  # the training mini-batch size (the training-set size for full batch)
    seed: int  # the run seed


def _identity_wrap(module: nn.Module) -> nn.Module:
    return module


@dataclass(frozen=True)
class Normalizer:
    """A named normalization scheme, injected into models."""

    name: str
    build: Callable[..., nn.Module]  # build(num_features, kind, **options)
    wrap: Callable[[nn.Module], nn.Module] = _identity_wrap
    linear_bias: bool = True
    description: str = ""
    uses_batch_statistics: bool = False  # training mode normalizes with batch statistics
    stochastic: bool = False  # training mode draws noise (of the step set by set_step)
    # its layers run under torch.func.vmap with the same numbers at every block size, so a
    # block's seeds train stacked (:mod:`bnstudy.train.stacked`); False (required with
    # stochastic or before_update): its seeds train one after another, unbatched
    batched: bool = True
    options: dict = field(default_factory=dict)  # defaults; with_options gives configured ones
    check: Callable[[dict], None] | None = None  # validates option values
    # option -> its one-line meaning: `python -m bnstudy list normalizers` prints it with the
    # default from ``options``, so an option is declared (default, check, meaning) only here
    option_docs: dict[str, str] = field(default_factory=dict)
    bias_init: str | None = None  # overrides the model config's bias_init when set
    on_init: Callable[[nn.Module, HookContext, dict], None] | None = None
    before_update: Callable[[nn.Module, HookContext, int, dict], None] | None = None

    def layer(self, num_features: int, kind: str) -> nn.Module:
        if kind not in ("fc", "conv"):
            raise ValueError(f"layer kind must be 'fc' or 'conv', got {kind!r}")
        return self.build(num_features, kind, **self.options)

    def with_options(self, options: dict | None) -> Normalizer:
        """This normalizer with ``options`` over its defaults (checked)."""
        options = dict(options or {})
        unknown = sorted(set(options) - set(self.options))
        if unknown:
            valid = ", ".join(sorted(self.options)) or "none"
            raise ValueError(f"unknown option(s) {unknown} for normalizer {self.name!r}; "
                             f"valid: {valid}")
        merged = {**self.options, **options}
        if self.check is not None:
            self.check(merged)
        return replace(self, options=merged)

    def option_help(self) -> list[str]:
        """One line per option: ``name (default): meaning``, generated from ``options`` and
        ``option_docs`` (the listing of the CLI's ``list normalizers``; no hand-kept table)."""
        return [f"{k} ({_yaml(v)})" + (f": {self.option_docs[k]}" if k in self.option_docs else "")
                for k, v in self.options.items()]

    def init_overrides(self) -> dict:
        """Model-config fields this normalizer overrides (the bias-init baselines)."""
        if self.bias_init is None:
            return {}
        out = {"bias_init": self.bias_init}
        if self.options.get("bias_std") is not None:
            out["bias_std"] = float(self.options["bias_std"])
        return out


def _yaml(value) -> str:
    """``value`` as a config spells it (null, true/false), for the option listing."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    return repr(value) if isinstance(value, str) else str(value)


REGISTRY: dict[str, Normalizer] = {}
SOURCES: dict[str, str] = {}  # name -> the module that registered it


# torch's own layers that keep float32 statistics under autocast
TORCH_FLOAT32 = (nn.modules.batchnorm._NormBase, nn.LayerNorm, nn.GroupNorm)  # noqa: SLF001


def conventions(norm: Normalizer) -> None:
    """The conventions every normalizer keeps (EXTENDING.md, "A normalizer"), checked on the
    layers its ``build`` makes with its default options: it builds for both input kinds, ``"fc"``
    (N, C) and ``"conv"`` (N, C, H, W); a layer that is more than ``nn.Identity`` computes its
    statistics in float32 under autocast (it derives from
    :class:`bnstudy.networks.norms.float32.Float32Statistics`, or is torch's BN, LayerNorm or
    GroupNorm); a ``weight`` parameter is the per-unit scale (gamma), of shape (C,). A broken
    one raises ValueError naming the normalizer and the rule. (Forward-mode AD, which the
    smoothness and ICS measures use, is the layer's own torch ops: no custom autograd.Function
    without a ``jvp``; the normalizer tests check it.)"""
    from bnstudy.networks.norms.float32 import Float32Statistics

    built = 0
    for kind in ("fc", "conv"):
        try:
            layer = norm.build(4, kind, **norm.options)
        except ValueError:  # a kind it does not support, refused in words (instance norm: fc)
            continue
        except Exception as err:  # noqa: BLE001 (any other failure breaks the rule)
            raise ValueError(f"normalizer {norm.name!r} breaks the input-kinds rule: build(4, "
                             f"{kind!r}) failed ({type(err).__name__}: {err}); a normalizer "
                             "builds for 'fc' (N, C) and 'conv' (N, C, H, W) inputs, or refuses "
                             "a kind with a ValueError saying why") from err
        built += 1
        if type(layer) is not nn.Identity and not isinstance(layer, (Float32Statistics,
                                                                     *TORCH_FLOAT32)):
            raise ValueError(
                f"normalizer {norm.name!r} breaks the autocast rule: its {kind} layer "
                f"{type(layer).__name__} does not compute its statistics in float32 under "
                "autocast; derive it from bnstudy.networks.norms.float32.Float32Statistics "
                "(class MyLayer(Float32Statistics, nn.Module)) or use torch's BN, LayerNorm or "
                "GroupNorm")
        weight = getattr(layer, "weight", None)
        if isinstance(weight, nn.Parameter) and tuple(weight.shape) != (4,):
            raise ValueError(f"normalizer {norm.name!r} breaks the weight rule: its {kind} "
                             f"layer's weight has shape {tuple(weight.shape)}, not (C,) = (4,); "
                             "a normalizer's weight is its per-unit scale (gamma)")
    if norm.batched and (norm.stochastic or norm.before_update is not None):
        raise ValueError(f"normalizer {norm.name!r} breaks the batching rule: a normalizer that "
                         "draws noise per step or has a before_update hook is registered "
                         "batched=False (its seeds train one after another)")
    if not built:
        raise ValueError(f"normalizer {norm.name!r} breaks the input-kinds rule: it builds for "
                         "neither 'fc' (N, C) nor 'conv' (N, C, H, W) inputs")


def register(norm: Normalizer) -> Normalizer:
    """Add ``norm`` to the registry (the calling module is recorded as its source: it must name
    the entry in its ``NORMALIZERS`` tuple, :func:`bnstudy.networks.norms.entry_modules`), after
    checking its :func:`conventions`."""
    if norm.name in REGISTRY:
        raise ValueError(f"normalizer {norm.name!r} is already registered")
    conventions(norm)
    REGISTRY[norm.name] = norm
    caller = inspect.currentframe().f_back
    SOURCES[norm.name] = caller.f_globals.get("__name__", "?") if caller else "?"
    return norm


def get(name: str, options: dict | None = None) -> Normalizer:
    try:
        norm = REGISTRY[name]
    except KeyError:
        valid = ", ".join(sorted(REGISTRY))
        raise ValueError(f"unknown normalizer {name!r}; valid choices: {valid}") from None
    return norm.with_options(options)


def names() -> list[str]:
    return sorted(REGISTRY)


def require(opts: dict, key: str, ok: Callable, valid: str) -> None:
    if not ok(opts[key]):
        raise ValueError(f"bad normalizer option {key}={opts[key]!r}; valid: {valid}")


def int_at_least(lo: int) -> Callable:
    return lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= lo


def number_at_least(lo: float) -> Callable:
    return lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and v >= lo


def identity(c: int, kind: str, **_) -> nn.Module:
    """The layer of a normalizer that adds none (its effect is in ``wrap`` or the init)."""
    return nn.Identity()


def weight_norm(module: nn.Module) -> nn.Module:
    """Weight normalization ``w = g v / ||v||`` of a linear/conv map (a ``wrap``)."""
    return parametrizations.weight_norm(module, name="weight", dim=0)


def check_eps(o: dict) -> None:
    require(o, "eps", number_at_least(0), "a number >= 0")


# the traits of a normalizer that normalizes with the batch's statistics (BN and its variants)
BN = {"linear_bias": False, "uses_batch_statistics": True}
