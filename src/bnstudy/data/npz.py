"""Reading a dataset ``.npz`` file without trusting the sizes it declares.

``np.load`` allocates each array at the shape its ``.npy`` header declares before reading a
byte of it: a file whose header says ``(10**11, 2)`` raised a MemoryError (a 26-line traceback)
instead of naming the file. :func:`read` reads each member's header first and refuses one whose
declared size differs from the bytes the member holds (an uncompressed ``np.savez`` member holds
exactly its array), so nothing is allocated for a size the file does not have; an allocation
that still fails is named too. Both raise :class:`bnstudy.io.CorruptFile`, one line naming the
file.
"""

from __future__ import annotations

import math
import zipfile
from pathlib import Path

import numpy as np

from bnstudy.io import REDO, CorruptFile


def _declared(zf: zipfile.ZipFile, info: zipfile.ZipInfo) -> tuple[tuple, np.dtype, int]:
    """``(shape, dtype, data bytes the member holds)`` from a member's ``.npy`` header."""
    with zf.open(info) as fh:
        version = np.lib.format.read_magic(fh)
        header = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                  else np.lib.format.read_array_header_2_0)
        shape, _, dtype = header(fh, max_header_size=10_000)
        return tuple(shape), dtype, info.file_size - fh.tell()


def check_sizes(path: str | Path) -> None:
    """Refuse (:class:`CorruptFile`) an ``.npz`` member whose header declares another size than
    the bytes it holds, before anything is allocated."""
    try:
        with zipfile.ZipFile(path) as zf:
            for info in zf.infolist():
                if not info.filename.endswith(".npy"):
                    continue
                shape, dtype, held = _declared(zf, info)
                if dtype.hasobject:
                    continue  # np.load refuses it (allow_pickle=False), naming it
                need = math.prod(shape) * dtype.itemsize
                if need != held:
                    raise CorruptFile(
                        f"{path} is corrupt or not a bnstudy dataset: its array "
                        f"{info.filename[:-4]!r} declares shape {shape} of {dtype} "
                        f"({need:,} bytes) but holds {held:,} bytes; {REDO}")
    except FileNotFoundError:
        raise
    except (OSError, ValueError, EOFError, zipfile.BadZipFile, SyntaxError) as e:
        raise CorruptFile(f"{path} is corrupt, truncated or not a bnstudy dataset "
                          f"({type(e).__name__}: {e}); {REDO}") from None


def read(path: str | Path, names) -> dict:
    """``{name: array}`` of ``names`` from ``.npz`` file ``path`` (no pickle), its declared sizes
    checked first (:func:`check_sizes`); a failed allocation is named as well."""
    check_sizes(path)
    try:
        with np.load(path, allow_pickle=False) as z:
            return {k: z[k] for k in names}
    except MemoryError:
        raise CorruptFile(f"{path}: its arrays could not be allocated (out of memory); if the "
                          f"file is damaged, {REDO}") from None
