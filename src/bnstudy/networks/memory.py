"""Memory budgets of the chunked passes, and what one input row costs a pass.

A measure that runs a network over many rows (partition density's forward-mode passes, BN
jitter's population pass and grid forwards, the population statistics both freeze) cuts them
into chunks. A fixed row count cannot fit every model and every card: 65536 rows of CIFAR
images through a ResNet9 hold hundreds of GB of activations, while a 2-D MLP takes them in one
chunk. So the chunks are sized from a memory budget (the measures' ``memory_budget_mb`` option)
and the model's per-row cost. The budget is

- ``"auto"`` (the default): on a CUDA device, :data:`CUDA_BUDGET_FRACTION` of the memory free to
  this process, :func:`free_bytes` (the driver's free memory plus what torch's caching
  allocator holds unallocated: both can be handed to the next tensor), read when the measure
  runs on that device, so the same config fits a 24 GB and an 80 GB card; on the CPU, where no
  free-memory figure is worth trusting on a shared machine, a stated :data:`CPU_BUDGET_MB`;
- a positive number: that many MiB, on any device.

The other half of the memory (on CUDA) is left to what the budget does not count: the model,
its copies, the data on the device and the allocator's fragmentation. A job's cluster request
(:mod:`bnstudy.planning.resources`) must not depend on the machine that prints it, so it takes
:func:`planning_mb`: "auto" counts as the CPU budget there.

Importing this module does not import torch (the options classes and the cluster estimate
read it); :func:`free_bytes` and :func:`activation_bytes` use the torch the caller already has.
"""

from __future__ import annotations

import math

AUTO = "auto"
CPU_BUDGET_MB = 2048.0  # "auto" on the CPU, and in every job's cluster request
CUDA_BUDGET_FRACTION = 0.5  # of the device memory free to this process (driver's + the cache's)
MB = 2**20
VALID = 'valid choices: "auto" or a positive number (MiB)'


def is_budget(value) -> bool:
    """Whether ``value`` is a valid memory budget: "auto" or a positive finite number."""
    if isinstance(value, str) and value == AUTO:
        return True
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and 0 < value < math.inf)


def check(value, key: str = "memory_budget_mb"):
    """``value`` if it is a valid budget; else a ValueError naming ``key``, the value and the
    valid choices."""
    if not is_budget(value):
        raise ValueError(f"{key}={value!r}: {VALID}")
    return value


def free_bytes(device) -> int:
    """Bytes of a CUDA ``device``'s memory this process can still allocate: the driver's free
    memory plus the cached-but-unallocated memory of torch's caching allocator."""
    import torch

    free, _ = torch.cuda.mem_get_info(device)
    cached = torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device)
    return int(free + cached)


def budget_mb(value, device) -> float:
    """The budget in MiB that ``value`` (a checked option) gives a pass on ``device`` (a
    ``torch.device``): "auto" resolves as the module docstring says, a number is itself."""
    check(value)
    if value != AUTO:
        return float(value)
    if device.type == "cuda":
        return CUDA_BUDGET_FRACTION * free_bytes(device) / MB
    return CPU_BUDGET_MB


def planning_mb(value) -> float:
    """The budget a cluster request assumes: a number is itself, "auto" the CPU budget (the
    request must not depend on the machine that plans it)."""
    check(value)
    return CPU_BUDGET_MB if value == AUTO else float(value)


def fit_rows(budget: float, row_bytes: int, cap: int) -> int:
    """Rows of ``row_bytes`` each that ``budget`` MiB holds, at most ``cap``, at least 1."""
    return max(1, min(int(cap), int(budget * MB) // max(1, int(row_bytes))))


def activation_bytes(model, input_shape) -> tuple[int, int]:
    """Bytes per input row of ``input_shape`` (without the batch dimension): the input and every
    leaf module's output summed (as if all were alive at once: an upper bound of a no-grad
    pass), and the largest of them. Runs two zero rows through an eval-mode deep copy under
    ``no_grad``: ``model`` is not touched."""
    import copy

    import torch

    net = copy.deepcopy(model).eval()
    p = next(net.parameters(), None)
    x = torch.zeros(2, *input_shape, device=p.device if p is not None else "cpu",
                    dtype=p.dtype if p is not None else torch.float32)
    sizes = [x.numel() * x.element_size()]

    def count(_m, _inp, out):
        if isinstance(out, torch.Tensor):
            sizes.append(out.numel() * out.element_size())

    hooks = [m.register_forward_hook(count) for m in net.modules() if not list(m.children())]
    try:
        with torch.no_grad():
            net(x)
    finally:
        for h in hooks:
            h.remove()
    return sum(sizes) // 2, max(sizes) // 2
