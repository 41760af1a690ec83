"""The normalizer registry: every normalization layer the study compares, by name.

Models never test for a normalizer by name. They receive a :class:`Normalizer` (the
``norm_layer`` pattern) and call it at each hidden layer::

    lin = norm.wrap(nn.Linear(d_in, d_out, bias=norm.linear_bias))
    block = [lin, norm.layer(d_out, "fc"), activation]

``layer(num_features, kind)`` builds the module that sits between the linear/conv map and the
activation (``kind`` is ``"fc"`` for (N, C) inputs and ``"conv"`` for (N, C, H, W) inputs);
``wrap(module)`` may reparametrize the linear/conv map itself (weight normalization does);
``linear_bias`` says whether that map keeps its own bias (BN's beta makes it redundant, and
BN-Explained's fixed-affine BN has no bias at all); ``bias_init`` overrides the model config's
bias initialization; ``on_init`` / ``before_update`` are trainer hooks (see
:mod:`bnstudy.networks.norms.population`, :mod:`bnstudy.networks.norms.bn_init`) for
normalizers whose statistics come from the training set.

Traits every measure relies on (``tests/test_normalizer_traits.py`` checks them against the
layers of every registered normalizer):

- ``uses_batch_statistics``: the training-mode map normalizes with statistics of the batch. Its
  layers implement :class:`bnstudy.networks.norms.layers.BatchStatistics`, the one interface through
  which population statistics are frozen or recomputed (:func:`batch_statistics_layers`).
- ``stochastic``: the training-mode map is random. Its layers draw the noise of the training
  step the trainer sets (:func:`set_step`), the same in every pass at that step
  (:mod:`bnstudy.networks.norms.noisy`).

Options: a model config's ``norm_options`` maps normalizer names to their options, e.g.
``{"ghost_batchnorm": {"ghost_batch_size": 8}}``, so one model serves every normalizer of an
experiment; each normalizer gets its own entry (:meth:`Normalizer.with_options`). Unknown names,
unknown options or bad values fail with the valid choices when the study config is checked
(:meth:`bnstudy.networks.models.ModelConfig.validate`). Each normalizer declares its options
(defaults, checks and one-line meanings) in its own registration and nowhere else:
``python -m bnstudy list normalizers`` lists them, generated from the registry.

Each normalizer is registered by the module under :mod:`bnstudy.networks.norms` that defines it
(:func:`bnstudy.networks.norms.registry.register`; the module names its entries in a
``NORMALIZERS`` tuple, which the workflow reads without importing torch): adding a normalizer is
adding its module (and its test), and the code hash of a training run covers its own
normalizer's module only, so a new or changed normalizer reruns only the runs that use it.
This module imports every module of that package (discovery) and re-exports the registry.
Unknown names fail with the list of valid ones.
"""

from __future__ import annotations

import importlib
import pkgutil

from torch import nn

from bnstudy.networks import norms
from bnstudy.networks.norms import layers as nl
from bnstudy.networks.norms import noisy as nln
from bnstudy.networks.norms.registry import (  # noqa: F401 (the registry's interface)
    REGISTRY,
    SOURCES,
    HookContext,
    Normalizer,
    get,
    names,
    register,
)


def _discover() -> None:
    """Import every module of :mod:`bnstudy.networks.norms`: each registers what it defines."""
    for info in sorted(pkgutil.iter_modules(norms.__path__), key=lambda i: i.name):
        importlib.import_module(f"{norms.__name__}.{info.name}")


_discover()


def batch_statistics_layers(model: nn.Module) -> list[nl.BatchStatistics]:
    """Every layer of ``model`` whose training map normalizes with batch statistics (the layers
    of the ``uses_batch_statistics`` normalizers), input to output."""
    return [m for m in model.modules() if isinstance(m, nl.BatchStatistics)]


def batchnorm_modules(model: nn.Module) -> list[nl.BatchStatistics]:
    """The batch-statistics layers whose statistics are a mean and a variance held in BN's
    running buffers (BN and its noisy, jitter, ghost, mean-only and variance-only variants): the
    :func:`batch_statistics_layers` without the l_p norms (whose statistics are a mean and an
    l_p scale)."""
    return [m for m in batch_statistics_layers(model) if m.STATISTICS == ("mean", "var")]


def set_step(model: nn.Module, step: int) -> None:
    """Make the stochastic layers of ``model`` draw the noise of training step ``step``."""
    nln.set_step(model, step)
