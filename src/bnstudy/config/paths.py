"""The paths a study config names (its files, ``extends:``, ``results``, a real dataset's
``data_dir``): a leading ``~`` expanded as a shell would (:func:`expand`; a path used as given
would make a folder named ``~`` in the working directory), and a symbolic link on the way that
leads nowhere named before any work (:func:`link_problem`: a loop, or a dangling link, whose
target does not exist, which ``mkdir`` would report only as "File exists").

Nothing here raises: the callers (:mod:`bnstudy.config.loader`,
:mod:`bnstudy.config.setup_checks`) turn a problem into a ConfigError naming the key.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

NAME_MAX = 255  # bytes of one file or folder name (Linux, macOS; "File name too long" past it)


def expand(path: str) -> str:
    """``path`` with a leading ``~`` or ``~user`` expanded to that home folder (else as given)."""
    return os.path.expanduser(path) if path.startswith("~") else path


def link_problem(path: str | Path) -> str | None:
    """Why ``path`` cannot be followed, in words: its first component (from the top) that is a
    symbolic link loop, or a dangling link (its target does not exist); None when every link on
    the way resolves, or none is there."""
    p = Path(path)
    for q in (*reversed(p.parents), p):
        if not q.is_symlink():
            continue
        try:
            os.stat(q)
        except OSError as e:
            if e.errno == errno.ELOOP:
                return f"{str(q)!r} is a symbolic link loop (it leads back to itself)"
            if e.errno == errno.ENOENT:
                return (f"{str(q)!r} is a dangling symbolic link (to {os.readlink(q)!r}, which "
                        "does not exist)")
            return f"{str(q)!r} is a symbolic link that cannot be followed ({e.strerror})"
    return None


def long_part(path: str | Path) -> str | None:
    """The first file or folder name of ``path`` longer than :data:`NAME_MAX` bytes, if any."""
    return next((part for part in Path(path).parts
                 if len(os.fsencode(part)) > NAME_MAX), None)
