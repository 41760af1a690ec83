"""bnstudy: what do normalization layers do to a deep network? Measured, reproducibly."""

__version__ = "0.1.0"
