"""Argument files: the arguments of a job that grow with the study, one per line.

The workflow's local rule ``job_arguments`` writes them (:func:`write_arguments`, through
``workflow/scripts/write_arguments.py``) and the job's command names the file as ``@FILE``
(argparse's ``fromfile_prefix_chars``), so no command line grows with the study (Linux refuses
one argument over 128 KiB: the run grid of about 1,260 experiments). Importing this module is
cheap (no torch, no plan): the rule runs once per such job.
"""

from __future__ import annotations

import os

from bnstudy import io


def write_arguments(path: str, arguments: list[str], log: str | None = None) -> None:
    """``arguments`` written to ``path``, one per line, as argparse reads ``@path`` (a file
    replaced whole: a reader never sees half of it); ``log`` gets one line saying so."""
    bad = [a for a in arguments if "\n" in a or "\r" in a]
    if bad:
        raise ValueError(f"argument {bad[0][:80]!r} holds a line break; an argument file holds "
                         "one argument per line")
    io.write_bytes(path, "".join(f"{a}\n" for a in arguments).encode())
    if log is not None:
        os.makedirs(os.path.dirname(log) or ".", exist_ok=True)
        with open(log, "w", encoding="utf-8") as fh:
            fh.write(f"{path}: {len(arguments)} arguments, "
                     f"{sum(len(a) + 1 for a in arguments)} bytes\n")
