"""Layer-by-layer statistics over a data set with one forward per image, within a memory budget.

Population statistics of a network's normalization layers (frozen BN's train-set statistics,
BN jitter's population moments, population norm's input moments, bn_init's frozen map) are
sequential: layer ``k``'s statistics are those of its input over the *whole* data set, computed
with the layers before it already fixed at their own statistics. When the data take several
chunks, no chunk may run layer ``k`` before every chunk has reached it. Stopping a chunked pass
at each layer in turn gives that, but runs the prefix of the network once per layer: 4.2
forwards per image for ResNet9 or VGG11, 10.2 for ResNet18.

:func:`layer_by_layer` runs each chunk's forward once instead and *suspends* it at every listed
module: the chunk hands its input to ``grab`` and waits; once every chunk waits there,
``freeze`` fixes that layer, and the chunks go on, in order, to the next listed module. A
suspended forward is a worker thread used as a coroutine (:mod:`bnstudy.networks.suspended`:
the model's own ``forward``, hooks and all, so any architecture works): exactly one thread runs
at a time, chunk after chunk, so ``grab`` sees the chunks in their order and every chunk's
forward computes the same operations on the same tensors as a pass stopped at each layer. The
numbers are the per-layer passes' own, bitwise (for a deterministic forward: a dropout draw is
not the same draw in both). A data set of one chunk runs inline, with no thread.

Memory: the cache of the single pass is the suspended forwards themselves. While waiting at a
module, a chunk holds what its forward still needs: the module's input plus the tensors the
enclosing forwards keep (the block's input, a residual block's skip), so the cache is about
``len(x)`` times those live activations per image at the widest stop (e.g. ResNet9 width 64 on
32x32 images, at its second conv's norm: the 64-channel input and the 128-channel output, 768
KiB per image, about 37 GiB for 50k images). So the pass has a budget (``budget_bytes``;
by default half the CUDA memory free to this process, :data:`CUDA_BUDGET_FRACTION`, or
:data:`CPU_BUDGET_BYTES` on the CPU) and a second mode, the *per-layer passes*: for each listed
module in turn every chunk's forward runs to that module's input, hands it to ``grab`` and is
abandoned (1 + 2 + ... forwards per image through the prefix, the memory of one chunk). The
mode is chosen as the pass goes: the first chunk runs first to every stop, and there, before it
grabs, the bytes its suspended forward holds are taken (on CUDA, the change of
``torch.cuda.memory_allocated`` while it alone ran; on the CPU, where what a suspended thread
keeps cannot be read off, :data:`HELD_FACTOR` times the largest per-image input of a listed
module so far) and scaled to ``len(x)`` images. While that stays within the budget, the single
pass goes on (the estimated cache never outgrows the budget: every chunk waits at a stop
already checked); the first stop over it abandons the suspended forwards and hands the rest to
per-layer passes, from that module on, the first chunk's input there the first one grabbed (a
budget of 0 gives per-layer passes throughout, the first chunk's forward being the first one).
Both modes give the same numbers, bitwise; ``grab``'s own work (float64 copies, sums) is per
chunk in both. In per-layer passes a listed module off the forward path costs a whole forward
of every chunk (the pass that looks for it). The choice and its reason are logged (``bnstudy``
logger, INFO), once per call.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence

import torch
from torch import nn

from bnstudy.networks.memory import CUDA_BUDGET_FRACTION, free_bytes
from bnstudy.networks.suspended import END, Suspended, Unwind, caller_context

log = logging.getLogger("bnstudy")

# On CUDA the budget is CUDA_BUDGET_FRACTION of free_bytes: the one definition, shared with the
# measures' "auto" memory budgets (bnstudy.networks.memory). On the CPU:
CPU_BUDGET_BYTES = 4 * 2 ** 30
# What a suspended forward holds, in units of the largest listed module's input so far: the
# input itself, the enclosing blocks' inputs, a residual block's skip and shortcut. Read off the
# stack frames of the suspended forwards of this package's MLP, CNN, VGG, ResNet9 and ResNet18
# (no_grad): at most 3; 4 leaves a margin. Under grad mode autograd keeps much more: the callers
# run without it.
HELD_FACTOR = 4


def default_budget(device: torch.device) -> int:
    """The bytes the suspended forwards may hold on ``device`` (module docstring)."""
    if device.type == "cuda":
        return int(CUDA_BUDGET_FRACTION * free_bytes(device))
    return CPU_BUDGET_BYTES


def _check_order(j: int, reached: list[int]) -> None:
    if reached and j <= reached[-1]:
        raise RuntimeError(f"listed module {j} ran after listed module {reached[-1]}: the "
                           "modules must be listed in forward order and run once per forward")


def _same_path(what: str) -> RuntimeError:
    return RuntimeError(f"the chunks {what}: their forwards must take the same path")


def layer_by_layer(model: nn.Module, x: torch.Tensor, chunk: int, modules: Sequence[nn.Module],
                   grab: Callable[[int, torch.Tensor], None], freeze: Callable[[int], None],
                   budget_bytes: int | None = None) -> list[int]:
    """Run ``x`` through ``model`` in chunks of ``chunk`` rows, stopping at each of ``modules``
    (in forward order): ``grab(j, z)`` gets every chunk's input ``z`` to ``modules[j]``, in chunk
    order, then ``freeze(j)`` runs before any chunk goes on into ``modules[j]``. One suspended
    forward per image while the forwards' cache fits in ``budget_bytes`` (``None``: the device's
    :func:`default_budget`), else per-layer passes (module docstring): the same calls, the same
    numbers. Returns the indices of the modules the forward reached (the caller decides whether a
    module off the forward path is an error). The model's mode is the caller's."""
    if isinstance(chunk, bool) or not isinstance(chunk, int) or chunk < 1:
        raise ValueError(f"chunk={chunk!r}: allowed: an int >= 1")
    if budget_bytes is not None and (isinstance(budget_bytes, bool)
                                     or not isinstance(budget_bytes, int) or budget_bytes < 0):
        raise ValueError(f"budget_bytes={budget_bytes!r}: allowed: None (the device's default) "
                         "or an int >= 0")
    if len(x) <= chunk:
        log.info("layer_by_layer: one pass, inline: the %d images are one chunk", len(x))
        return _inline(model, x, modules, grab, freeze)
    budget = default_budget(x.device) if budget_bytes is None else budget_bytes
    return _Pass(model, x, chunk, modules, grab, freeze, budget).run()


def _inline(model, x, modules, grab, freeze) -> list[int]:
    """The whole data set is this input: each layer is fixed before it runs."""
    reached: list[int] = []

    def stop(j: int, z: torch.Tensor) -> None:
        grab(j, z)
        _check_order(j, reached)
        freeze(j)
        reached.append(j)

    hooks = [m.register_forward_pre_hook(lambda m, inp, j=j: stop(j, inp[0]))
             for j, m in enumerate(modules)]
    try:
        model(x)
    finally:
        for h in hooks:
            h.remove()
    return reached


def _size(n: int) -> str:
    if n >= 2 ** 30:
        return f"{n / 2 ** 30:.2f} GiB"
    return f"{n / 2 ** 20:.1f} MiB" if n >= 2 ** 20 else f"{n} B"


class _Pass:
    """One call's pass over several chunks: suspended forwards, then per-layer passes once the
    first chunk's hold, scaled to all images, outgrows the budget."""

    def __init__(self, model, x, chunk, modules, grab, freeze, budget: int):
        self.model, self.modules, self.grab, self.freeze = model, modules, grab, freeze
        self.chunks = [x[i: i + chunk] for i in range(0, len(x), chunk)]
        self.rows, self.budget, self.cuda = len(x), budget, x.device.type == "cuda"
        self.reached: list[int] = []
        self.held, self.base, self.widest = 0, 0, (0, None)  # widest: (projected bytes, module)
        self.first: Suspended | None = None
        self.switch: int | None = None  # the module where per-layer passes take over
        self.target: int | None = None  # the module a per-layer pass grabs at
        self.seen: list[int] = []  # the listed modules a per-layer pass's forward has run

    def run(self) -> list[int]:
        hooks = [m.register_forward_pre_hook(lambda m, inp, j=j: self.stop(j, inp[0]))
                 for j, m in enumerate(self.modules)]
        try:
            self.suspended_forwards()
            if self.switch is not None:
                self.per_layer_passes()
        finally:
            for h in hooks:
                h.remove()
        return self.reached

    def stop(self, j: int, z: torch.Tensor) -> None:
        if self.target is not None:  # a per-layer pass, in the caller's thread
            _check_order(j, self.seen)
            self.seen.append(j)
            if j == self.target:
                self.grab(j, z)
                raise Unwind
            return
        worker = threading.current_thread()
        if worker is self.first:
            _check_order(j, self.reached)
            if not self.fits(j, z):  # per-layer passes from here: this input is their first
                self.switch = j
                self.grab(j, z)
                raise Unwind
        self.grab(j, z)
        worker.wait(j)

    def fits(self, j: int, z: torch.Tensor) -> bool:
        """Whether ``len(x)`` images, held as the first chunk holds them now, fit the budget."""
        if self.cuda:  # its forward alone ran since ``base`` was taken
            self.held += torch.cuda.memory_allocated(z.device) - self.base
        else:
            self.held = max(self.held, HELD_FACTOR * z.numel() * z.element_size())
        projected = self.held * self.rows // len(z)
        if projected > self.widest[0]:
            self.widest = (projected, j)
        return projected <= self.budget

    def how(self) -> str:
        return ("torch.cuda.memory_allocated" if self.cuda
                else f"{HELD_FACTOR} x the largest listed input")

    def suspended_forwards(self) -> None:
        context = caller_context(self.chunks[0].device)
        workers = [Suspended(lambda c=c: self.model(c), context) for c in self.chunks]
        self.first = workers[0]
        for w in workers:
            w.start()
        try:
            while True:
                if self.cuda:
                    self.base = torch.cuda.memory_allocated(self.chunks[0].device)
                for w in workers:  # chunk after chunk, each to its next stop
                    w.step()
                    if self.switch is not None:
                        return
                stops = {w.at for w in workers}
                if stops == {END}:
                    break
                if len(stops) > 1:
                    raise _same_path(f"stopped at different modules {sorted(stops)}")
                j = stops.pop()
                self.freeze(j)
                self.reached.append(j)
        finally:
            for w in workers:  # unwind the forwards still suspended (after a switch, an error)
                w.unwind()
        projected, j = self.widest
        log.info("layer_by_layer: one suspended forward per image: %d images in %d chunks hold "
                 "at most %s (%s, from %s), within the budget of %s", self.rows, len(self.chunks),
                 _size(projected), "no listed module reached" if j is None else
                 f"at listed module {j}", self.how(), _size(self.budget))

    def per_layer_passes(self) -> None:
        j = self.switch
        log.info("layer_by_layer: per-layer passes from listed module %d on: %d images in %d "
                 "chunks would hold %s there (from %s), over the budget of %s", j, self.rows,
                 len(self.chunks), _size(self.widest[0]), self.how(), _size(self.budget))
        self.layer_pass(j, self.chunks[1:], first=True)
        self.freeze(j)
        self.reached.append(j)
        for k in sorted(set(range(len(self.modules))) - set(self.reached)):
            if self.layer_pass(k, self.chunks):
                self.freeze(k)
                self.reached.append(k)

    def layer_pass(self, k: int, chunks: list, first: bool = False) -> bool:
        """Every chunk's forward to module ``k``'s input, grabbed, then abandoned: whether they
        reached it (``first``: the first chunk's already did)."""
        hit = [True] if first else []
        self.target = k
        try:
            for c in chunks:
                self.seen = []
                try:
                    self.model(c)
                    hit.append(False)
                except Unwind:
                    hit.append(True)
        finally:
            self.target = None
        if any(hit) and not all(hit):
            raise _same_path(f"did not all reach listed module {k}")
        return all(hit)
