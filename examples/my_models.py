"""A model of your own, outside the package: an MLP whose hidden widths narrow layer by layer.

A study config names it by its file and function, with its keyword arguments (EXTENDING.md,
"Your own model"); examples/my_study.yaml trains it with every normalizer of
the study:

    models:
      funnel: {from: examples/my_models.py:funnel_mlp, options: {widths: [24, 16, 8]}}

The function gets the run's normalizer from the registry (``norm``), as the built-in
architectures do: ``norm.layer(width, "fc")`` is its layer, ``norm.wrap(linear)`` the map as the
normalizer wants it (weight norm reparametrizes it), ``norm.linear_bias`` whether the map keeps
a bias (BN's shift replaces it). Every hidden layer is a ``Block`` (map, normalizer, activation),
so the measures find its maps and pre-activations; the ``Net`` flattens the inputs and ends with
the linear head. The study's ``init``/``bias_init`` then draw the maps' weights.
"""

from __future__ import annotations

import math

from torch import nn

from bnstudy.networks.blocks import Block, Net


def funnel_mlp(norm, input_shape, out_dim, widths=(32, 16)):
    """Hidden blocks of ``widths`` units (ReLU), then a linear head."""
    d = math.prod(input_shape)
    layers = []
    for w in widths:
        linear = norm.wrap(nn.Linear(d, int(w), bias=norm.linear_bias))
        layers.append(Block(linear, norm.layer(int(w), "fc"), nn.ReLU()))
        d = int(w)
    return Net(nn.Sequential(*layers), nn.Linear(d, out_dim), input_shape, conv=False)
