"""A user's own model, named by a study config without forking the package.

A ``models:`` entry gives ``from`` instead of ``arch``, and the keyword arguments ``options``::

    models:
      mine: {from: my_models.py:build_mlp, options: {width: 64}}  # a file : function
      theirs: {from: mypkg.models:build}                          # a module : function
      fancy: {from: fancy}                  # an installed package's entry point (bnstudy.models)

The function is called as ``build(norm, input_shape, out_dim, **options)``: ``norm`` is the run's
normalizer from the registry, injected as the built-in architectures get it
(:class:`bnstudy.networks.norms.registry.Normalizer`: ``norm.layer(num_features, "fc" or
"conv")`` the layer, ``norm.wrap(linear)`` a map wrapped as the normalizer needs (weight norm),
``norm.linear_bias`` whether a map before it keeps its bias); ``input_shape`` excludes the batch
dimension; it returns a :class:`bnstudy.networks.blocks.Net` whose hidden layers are
:class:`~bnstudy.networks.blocks.Block` s (what the measures hook: their maps, normalizers and
pre-activations). :func:`build` checks what comes back; the config check builds it once on each
experiment's input shape and runs it forward (:func:`bnstudy.config.study._build`), so a missing
module, a function that fails or a model of the wrong output size is a one-line error before any
job. Jobs rebuild it from the run spec's ``model_config`` (which holds ``from``), and its file's
content is part of its runs' code version (:func:`bnstudy.user_code.source_digest`).
"""

from __future__ import annotations

from torch import nn

from bnstudy.networks.blocks import Net, StepDropout
from bnstudy.user_code import resolve

GROUP = "bnstudy.models"
CONTRACT = ("a function build(norm, input_shape, out_dim, **options) returning a "
            "bnstudy.networks.blocks.Net (EXTENDING.md, 'Your own model')")


def load(target: str):
    """The function ``target`` names; a one-line ValueError when it cannot be loaded or is not
    callable."""
    obj = resolve(target, GROUP)
    if not callable(obj):
        raise ValueError(f"{target!r} is a {type(obj).__name__}, not {CONTRACT}")
    return obj


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0]}" if text else type(e).__name__


def build(target: str, norm, input_shape, out_dim: int, options: dict) -> Net:
    """The model ``target``'s function builds with the normalizer ``norm`` injected; a one-line
    ValueError names the target and what is wrong (it raised, it returned no Net, it holds
    dropout layers, whose masks the trainer cannot replay)."""
    fn = load(target)
    try:
        net = fn(norm, tuple(int(v) for v in input_shape), int(out_dim), **dict(options))
    except Exception as e:  # noqa: BLE001 (the user's code: any error, named in one line)
        raise ValueError(f"{target!r} raised {_first_line(e)} (called with input_shape "
                         f"{tuple(input_shape)}, out_dim {out_dim}, options {dict(options)})"
                         ) from None
    if not isinstance(net, Net):
        raise ValueError(f"{target!r} returned a {type(net).__name__}, not a "
                         "bnstudy.networks.blocks.Net; allowed: " + CONTRACT)
    drops = [type(m).__name__ for m in net.modules()
             if isinstance(m, (nn.modules.dropout._DropoutNd, StepDropout))]  # noqa: SLF001
    if drops:
        raise ValueError(f"{target!r} returned a model with dropout layers ({drops[0]}); "
                         "allowed: none (the trainer replays each step's noise only for the "
                         "built-in archs' dropout)")
    return net
