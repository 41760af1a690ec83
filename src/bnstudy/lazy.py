"""Modules imported on first use, so that importing a module of this package stays cheap.

The workflow imports the figure registry (:mod:`bnstudy.plots`) when Snakemake parses the
Snakefile, and every table-only job (aggregate, claims, report) imports the modules it needs;
neither should pay for matplotlib and seaborn (about a second) unless it draws. A plot module
therefore writes::

    from bnstudy import lazy

    plt = lazy.module("matplotlib.pyplot")
    sns = lazy.module("seaborn")

and uses ``plt.subplots(...)``, ``sns.lineplot(...)`` as usual: the module is imported on the
first attribute access (never at import time). Before importing matplotlib or seaborn the
non-interactive Agg backend is selected, as the figures are only ever written to files.
"""

from __future__ import annotations

import importlib
from types import ModuleType

# Packages whose import may load matplotlib.pyplot, which fixes the backend.
_MATPLOTLIB = ("matplotlib", "seaborn")


class LazyModule:
    """A stand-in for module ``name`` that imports it on first attribute access (its own names
    start with ``_lazy_`` so that they never hide the module's)."""

    __slots__ = ("_lazy_name", "_lazy_module")

    def __init__(self, name: str):
        if not isinstance(name, str) or not name or any(not p.isidentifier()
                                                        for p in name.split(".")):
            raise ValueError(f"lazy module name {name!r} must be a dotted module name such as "
                             f"'matplotlib.pyplot'")
        object.__setattr__(self, "_lazy_name", name)
        object.__setattr__(self, "_lazy_module", None)

    def _lazy_load(self) -> ModuleType:
        """The module itself, imported now if it was not yet."""
        module = object.__getattribute__(self, "_lazy_module")
        if module is None:
            name = object.__getattribute__(self, "_lazy_name")
            if name.split(".")[0] in _MATPLOTLIB:
                import matplotlib

                matplotlib.use("Agg")
            module = importlib.import_module(name)
            object.__setattr__(self, "_lazy_module", module)
        return module

    def __getattr__(self, attr: str):
        return getattr(self._lazy_load(), attr)

    def __setattr__(self, attr: str, value) -> None:
        raise AttributeError(f"lazy module {self._lazy_name!r} is read-only (set {attr!r} on the "
                             f"module itself)")

    def __dir__(self):
        return dir(self._lazy_load())

    def __repr__(self) -> str:
        state = "imported" if object.__getattribute__(self, "_lazy_module") else "not imported yet"
        return f"<lazy module {self._lazy_name!r} ({state})>"


def module(name: str) -> LazyModule:
    """Module ``name``, imported on first attribute access (matplotlib and seaborn with the Agg
    backend)."""
    return LazyModule(name)
