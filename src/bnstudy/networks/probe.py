"""Looking inside a model without changing it: hooks on its modules, each block's
pre-activation, the blocks with a kink, and copies with frozen batch statistics.

The measures read the same few things off a network; they are here, once:

- **Hooks** (:func:`watch`, :func:`capture`): inside a ``with`` block, ``fn(j, t)`` runs with
  the output ``t`` of the ``j``-th listed module each time that module runs (``inputs=True``:
  its first positional input, before it runs); :func:`capture` keeps the tensors instead (the
  last of each module, or the first). The hooks never change what the module computes (their
  return values are dropped) and are removed when the block ends, on an exception too.
- **Pre-activations** (:func:`preactivations`): each block's pre-activation for one input batch,
  from one forward of the model as it is (its mode, the caller's grad mode). A block's
  pre-activation is the output of :attr:`bnstudy.networks.blocks.Block.preact`: the
  normalizer's output, plus the skip in a block that closes a residual connection, the tensor
  the activation folds (:mod:`bnstudy.networks.blocks`); ``site="norm"`` takes the
  normalizer's output instead (before the skip).
- **Kinked blocks** (:func:`kinked_blocks`): the blocks whose activation folds its input at 0
  (ReLU, a leaky ReLU of slope != 1), the layers of a ReLU network's spline partition; the
  identity (and a leaky ReLU of slope 1) has no kink, any other activation is an error.
- **Frozen batch statistics** (:func:`frozen_copy`): an eval-mode deep copy whose
  batch-statistics layers (every layer of a normalizer the registry marks
  ``uses_batch_statistics``: BN and its noisy, ghost, mean-only and variance-only variants, the
  l_p norms; :class:`bnstudy.networks.norms.layers.BatchStatistics`) normalize with fixed
  statistics, so the network is one fixed function of its input (``bn_statistics``):

  - ``train_set``: each layer's statistics (BN: mean and biased variance, what BN divides by in
    train mode, BN-Explained eq. (3); l_p norms: mean and l_p scale) of its input over the whole
    training set at the current weights, each layer's computed with the earlier layers already
    frozen at their own full-set statistics and running their *deterministic* map, i.e. exactly
    the frozen network's own layer inputs: ghost BN normalizes the whole set, not ghost
    batches, and noisy BN applies its eval map (the noise's expectation), not a draw of noise.
    One eval-mode forward per image, in chunks of ``chunk_rows`` rows, each chunk waiting at
    every layer until the layer is frozen from all chunks' inputs, while the waiting chunks fit
    the memory budget (else one pass stopped at each layer; the numbers are the same bitwise:
    :func:`bnstudy.networks.layer_stats.layer_by_layer`; float64 sums):
    :func:`population_statistics`;
  - ``batch``: the same over a given mini-batch (the step's recorded batch);
  - ``running``: the stored running buffers as they are (plain eval mode).

- **Modes** (:func:`training_mode`): train or eval mode inside a ``with`` block, each module's
  own mode restored afterwards.

Nothing here changes the model it is given, except :func:`population_statistics` (call it on a
copy).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

import torch
from torch import nn

from bnstudy.networks.blocks import Block, blocks
from bnstudy.networks.layer_stats import layer_by_layer
from bnstudy.networks.normalizers import batch_statistics_layers

BN_STATISTICS = ("train_set", "batch", "running")  # frozen_copy's choices
SITES = ("preact", "norm")  # where preactivations reads a block


def _on_output(fn: Callable[[int, torch.Tensor], object], j: int) -> Callable:
    """A forward hook calling ``fn(j, output)``; returns None, so the output is unchanged."""
    def hook(_module, _args, out):
        fn(j, out)
    return hook


def _on_input(fn: Callable[[int, torch.Tensor], object], j: int) -> Callable:
    """A forward pre-hook calling ``fn(j, first input)``; the input is unchanged."""
    def hook(_module, args):
        fn(j, args[0])
    return hook


@contextmanager
def watch(modules: Sequence[nn.Module], fn: Callable[[int, torch.Tensor], object],
          inputs: bool = False) -> Iterator[None]:
    """``fn(j, t)`` each time ``modules[j]`` runs within the block: ``t`` its output, or with
    ``inputs=True`` its first positional input. The hooks are removed on leaving, always."""
    handles = []
    try:
        for j, m in enumerate(modules):
            handles.append(m.register_forward_pre_hook(_on_input(fn, j)) if inputs
                           else m.register_forward_hook(_on_output(fn, j)))
        yield
    finally:
        for h in handles:
            h.remove()


@contextmanager
def capture(modules: Sequence[nn.Module], inputs: bool = False,
            first: bool = False) -> Iterator[dict[int, torch.Tensor]]:
    """A dict ``j -> tensor`` that :func:`watch` fills within the block: the last output (or
    input) of ``modules[j]``, or its first with ``first=True``. A module that did not run has
    no entry."""
    found: dict[int, torch.Tensor] = {}

    def keep(j: int, t: torch.Tensor) -> None:
        if not (first and j in found):
            found[j] = t

    with watch(modules, keep, inputs):
        yield found


def sites(model_blocks: Sequence[Block], site: str = "preact") -> list[nn.Module]:
    """The module whose output is each block's pre-activation (``block.preact``), or with
    ``site="norm"`` each block's normalizer."""
    if site not in SITES:
        raise ValueError(f"unknown site {site!r}; valid choices: {list(SITES)}")
    return [b.preact if site == "preact" else b.norm for b in model_blocks]


def preactivations(model: nn.Module, x: torch.Tensor, model_blocks: Sequence[Block] | None = None,
                   site: str = "preact", first: bool = False) -> list[torch.Tensor]:
    """Each block's pre-activation (``site``: :func:`sites`) from one forward of ``model`` on
    ``x``, as the model is (its mode; the caller's grad mode), input to output;
    ``model_blocks``: which blocks (default: all, :func:`bnstudy.networks.blocks.blocks`);
    ``first``: a block run twice gives its first pre-activation (default: its last)."""
    model_blocks = blocks(model) if model_blocks is None else list(model_blocks)
    with capture(sites(model_blocks, site), first=first) as found:
        model(x)
    missing = [f"block{j + 1}" for j in range(len(model_blocks)) if j not in found]
    if missing:
        raise RuntimeError(f"the forward pass skipped the {site} of {missing}")
    return [found[j] for j in range(len(model_blocks))]


def kinked(act: nn.Module) -> bool:
    """Whether the activation ``act`` folds its input at 0: ReLU or a leaky ReLU of slope != 1
    (True), the identity or a leaky ReLU of slope 1 (False); ValueError for any other."""
    if isinstance(act, nn.ReLU) or (isinstance(act, nn.LeakyReLU)
                                    and act.negative_slope != 1.0):
        return True
    if isinstance(act, nn.Identity) or (isinstance(act, nn.LeakyReLU)
                                        and act.negative_slope == 1.0):
        return False
    raise ValueError(f"need a piecewise-linear activation with a kink at 0 (ReLU, LeakyReLU) or "
                     f"the identity, got {act!r}")


def kinked_blocks(model: nn.Module) -> list[tuple[int, Block]]:
    """(1-based layer index, block) of every block whose activation folds the input at 0."""
    out = []
    for i, b in enumerate(blocks(model), start=1):
        try:
            if kinked(b.act):
                out.append((i, b))
        except ValueError:
            raise ValueError(f"partition density needs piecewise-linear activations with a kink "
                             f"at 0 (ReLU, LeakyReLU) or identity; layer {i} has {b.act!r}"
                             ) from None
    return out


@contextmanager
def training_mode(model: nn.Module, training: bool) -> Iterator[nn.Module]:
    """``model`` in train (``training=True``) or eval mode within the block; each module's own
    mode is restored on leaving, always."""
    modes = [(m, m.training) for m in model.modules()]
    try:
        yield model.train(training)
    finally:
        for m, was in modes:
            m.training = was


@torch.no_grad()
def population_statistics(net: nn.Module, x: torch.Tensor, chunk_rows: int = 65536,
                          budget_bytes: int | None = None) -> list:
    """Freeze every batch-statistics layer of ``net`` at the statistics of its input over all of
    ``x``, input to output, and return them (``[(mean, var)]`` for BN layers, ``[(mean,
    scale)]`` for l_p norms; float64). Puts ``net`` in eval mode and changes its buffers: call it
    on a copy. ``budget_bytes``: what the suspended chunks of the one-forward pass may hold
    (:func:`bnstudy.networks.layer_stats.layer_by_layer`; None: the device's default)."""
    layers = batch_statistics_layers(net)
    net.eval()
    accs: list = [None] * len(layers)
    stats: dict[int, tuple] = {}

    def grab(j: int, z: torch.Tensor) -> None:
        accs[j] = layers[j].accumulate(accs[j], z)

    def freeze(j: int) -> None:
        stats[j] = layers[j].population(accs[j])
        layers[j].freeze(stats[j])

    layer_by_layer(net, x, chunk_rows, layers, grab, freeze, budget_bytes)
    missing = sorted(set(range(len(layers))) - set(stats))
    if missing:
        raise RuntimeError(f"batch-statistics layers {missing} are not on the forward path")
    return [stats[j] for j in range(len(layers))]


@torch.no_grad()
def frozen_copy(model: nn.Module, bn_statistics: str, x_train: torch.Tensor | None = None,
                batch: torch.Tensor | None = None, chunk_rows: int = 65536,
                budget_bytes: int | None = None) -> nn.Module:
    """An eval-mode deep copy of ``model`` whose batch-statistics layers are fixed maps (their
    statistics: :func:`population_statistics`, within ``budget_bytes``)."""
    if bn_statistics not in BN_STATISTICS:
        raise ValueError(f"unknown bn_statistics {bn_statistics!r}; valid choices: "
                         f"{list(BN_STATISTICS)}")
    net = copy.deepcopy(model)
    layers = batch_statistics_layers(net)
    if layers and bn_statistics != "running":
        if x_train is None or (bn_statistics == "batch" and batch is None):
            raise ValueError(f"bn_statistics={bn_statistics!r} needs the training inputs"
                             + (" and the step's batch" if bn_statistics == "batch" else ""))
        x = x_train if bn_statistics == "train_set" else x_train[batch.to(x_train.device)]
        population_statistics(net, x, chunk_rows, budget_bytes)
    elif any(getattr(m, "running_mean", None) is None for m in layers):
        raise ValueError("bn_statistics='running' needs BN layers that track running statistics")
    return net.eval()
