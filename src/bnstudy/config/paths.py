"""The paths a study config names (its files, ``extends:``, ``results``, a real dataset's
``data_dir``): a leading ``~`` expanded as a shell would (:func:`expand`; a path used as given
would make a folder named ``~`` in the working directory), and a symbolic link on the way that
leads nowhere named before any work (:func:`link_problem`: a loop, or a dangling link, whose
target does not exist, which ``mkdir`` would report only as "File exists").

A study's ``results`` lies under the working directory (:func:`outside_workdir`) and is new,
empty or marked as bnstudy's (:func:`foreign_content`), so that ``results: /etc`` or
``../../elsewhere`` never has the workflow write beside files that are not its own.

Nothing here raises: the callers (:mod:`bnstudy.config.loader`,
:mod:`bnstudy.config.setup_checks`) turn a problem into a ConfigError naming the key.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

# a results directory's marker: written when a run starts work there (bnstudy.planning.lock.claim);
# a directory with it (or a run's study record, .bnstudy-study.json) is a bnstudy results directory
RESULTS_MARKER = ".bnstudy-results"
STUDY_RECORD = ".bnstudy-study.json"
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


def outside_workdir(path: str | Path) -> str | None:
    """The working directory, when ``path`` (its symbolic links followed) does not lie under it;
    else None."""
    cwd = Path.cwd().resolve()
    real = Path(os.path.realpath(path))
    return None if real == cwd or cwd in real.parents else str(cwd)


def foreign_content(path: str | Path) -> str | None:
    """What an existing, non-empty directory ``path`` holds (a few names) when it has no bnstudy
    marker (:data:`RESULTS_MARKER` or :data:`STUDY_RECORD`); None for a new, empty or marked
    directory (or one that cannot be listed: the writability check names that)."""
    p = Path(path)
    try:
        names = sorted(os.listdir(p)) if p.is_dir() else []
    except OSError:
        return None
    if not names or RESULTS_MARKER in names or STUDY_RECORD in names:
        return None
    shown = ", ".join(repr(n) for n in names[:3])
    return shown + (f" and {len(names) - 3} more" if len(names) > 3 else "")
