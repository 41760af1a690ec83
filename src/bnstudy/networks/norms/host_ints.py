"""Python-int views of 0-d buffers without a host-device sync per read.

A layer whose forward needs a buffer's value on the host (a noise layer's seed and step, a
calibration flag) would read it from the device (``int(buf)``) in every forward pass, stalling a
GPU once per layer per step. :func:`buffer_int` keeps the last value read or written with the
tensor's identity and version counter (which every in-place write bumps: ``fill_``, ``copy_``,
``load_state_dict``), and reads the device again only when either changed.
"""

from __future__ import annotations

from torch import nn


def remember_int(module: nn.Module, name: str, value: int) -> None:
    """Note that the 0-d buffer ``name`` of ``module`` now holds ``value`` (just written)."""
    buf = getattr(module, name)
    module.__dict__.setdefault("_host_ints", {})[name] = (buf, buf._version, int(value))


def buffer_int(module: nn.Module, name: str) -> int:
    """The 0-d buffer ``name`` of ``module`` as a Python int without a host-device sync per call:
    read from the device only when the buffer changed since the last read or
    :func:`remember_int` (a ``load_state_dict``, ``copy_`` or ``fill_`` bumps the tensor's
    version counter; a move to another device replaces the tensor)."""
    buf = getattr(module, name)
    hit = module.__dict__.get("_host_ints", {}).get(name)
    if hit is not None and hit[0] is buf and hit[1] == buf._version:
        return hit[2]
    value = int(buf)
    remember_int(module, name, value)
    return value
