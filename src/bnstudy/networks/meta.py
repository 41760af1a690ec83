"""Building a model on the meta device (``torch.device("meta")``: shapes, nothing allocated) to
count it (:func:`build`): :func:`bnstudy.config.model_checks.plan` (parameters and hidden blocks,
against the config's limits) and :func:`bnstudy.model_size.size` (what one sample costs, for the
cluster requests), which then runs one sample through the model on the CPU, its parameters and
buffers made zero-stride CPU tensors of their shapes by :func:`materialize`; and constructing
one on the CPU with no random draw (:func:`no_draws`), for the config check's normalizer arms.
Importing this module does not import torch."""

from __future__ import annotations


def build(model_cfg, input_shape, out_dim: int):
    """The model of ``model_cfg`` (a :class:`bnstudy.networks.models.ModelConfig`) without its
    normalizers and dropout (which add no weight matrices), built on the meta device under
    :func:`skip_init`, torch's random state left as it was."""
    from dataclasses import replace

    import torch

    from bnstudy.networks import models

    bare = replace(model_cfg, dropout=0.0, norm_options={})
    with torch.random.fork_rng(devices=[]), torch.device("meta"), skip_init():
        return models.build_model(bare, "none", tuple(input_shape), out_dim)


def skip_init():
    """A torch function mode in which an in-place operation on a meta tensor (``normal_``,
    ``uniform_``, ``fill_``, ...: the weight initializations) returns the tensor as it is. On the
    meta device torch runs them through its Python reference implementations, whose first call
    imports ``torch._dynamo`` (about 2 s of CPU in every Snakemake start and config check); the
    counts need shapes only, which in-place operations keep."""
    import torch

    class SkipMetaInit(torch.overrides.TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            name = getattr(func, "__name__", "")
            if (name.endswith("_") and not name.endswith("__") and args
                    and isinstance(args[0], torch.Tensor) and args[0].is_meta):
                return args[0]
            return func(*args, **(kwargs or {}))

    return SkipMetaInit()


DRAWS = ("normal_", "uniform_", "random_", "bernoulli_", "exponential_", "geometric_",
         "cauchy_", "log_normal_")  # the in-place random draws of tensors


def no_draws():
    """A torch function mode in which every in-place random draw (:data:`DRAWS`: the weight
    initializations' ``normal_``, ``uniform_``, ...) zeroes its tensor instead, on any device:
    a model built under it is constructed (its layers' checks run, its weights allocated and
    every other initialization step run, on zeros) without drawing one random number, for a
    check that discards it (:func:`bnstudy.config.study._build`)."""
    import torch

    class NoDraws(torch.overrides.TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            if (getattr(func, "__name__", "") in DRAWS and args
                    and isinstance(args[0], torch.Tensor)):
                with torch.no_grad():
                    return args[0].zero_()
            return func(*args, **(kwargs or {}))

    return NoDraws()


def materialize(net) -> None:
    """Every parameter and buffer of ``net`` (built on the meta device) replaced, in place, by a
    CPU tensor of its shape and dtype that is a zero expanded with zero strides: nothing
    allocated, and a forward pass computes real shapes through torch's compiled kernels (the
    values are zeros). Only for counting: such a tensor cannot be written to."""
    import torch

    for module in net.modules():
        for name, p in module._parameters.items():
            if p is not None:
                module._parameters[name] = torch.nn.Parameter(
                    torch.zeros((), dtype=p.dtype).expand(p.shape), requires_grad=False)
        for name, b in module._buffers.items():
            if b is not None:
                module._buffers[name] = torch.zeros((), dtype=b.dtype).expand(b.shape)
