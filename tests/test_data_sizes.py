"""Data readers refuse absurd declared sizes before allocating (issue 50, item 4).

An ``.npz`` dataset whose header says ``(10**11, 2)`` gave a 26-line numpy MemoryError traceback
in each try; it is now one line naming the file, and nothing that large is allocated.
"""

from __future__ import annotations

import gzip
import io as _io
import zipfile

import numpy as np
import pytest

from bnstudy import data, io
from bnstudy.data import files


def _npy(shape, dtype="<f4", payload=b"") -> bytes:
    buf = _io.BytesIO()
    np.lib.format.write_array_header_1_0(
        buf, {"descr": dtype, "fortran_order": False, "shape": shape})
    return buf.getvalue() + payload


def test_an_npz_declaring_an_absurd_shape_is_named_in_one_line(tmp_path):
    good = tmp_path / "good.npz"
    data.save(data.make("star2d", {"n_train": 8, "n_test": 8}), good)
    bad = tmp_path / "bad.npz"
    with zipfile.ZipFile(good) as src, zipfile.ZipFile(bad, "w") as dst:
        for info in src.infolist():
            raw = src.read(info)
            if info.filename == "x_train.npy":
                raw = _npy((10**11, 2), payload=b"\0" * 64)
            dst.writestr(info.filename, raw)
    assert len(data.load(good).x_train) == 8
    with pytest.raises(io.CorruptFile) as e:
        data.load(bad)
    msg = str(e.value)
    assert msg.startswith(str(bad)) and "\n" not in msg
    assert "(100000000000, 2)" in msg and "'x_train'" in msg


def test_an_allocation_failure_is_named(tmp_path, monkeypatch):
    path = tmp_path / "d.npz"
    data.save(data.make("star2d", {"n_train": 8, "n_test": 8}), path)

    def no_memory(*a, **k):
        raise MemoryError

    monkeypatch.setattr(np, "load", no_memory)
    with pytest.raises(io.CorruptFile, match="could not be allocated") as e:
        data.load(path)
    assert str(e.value).startswith(str(path))


def test_an_idx_file_declaring_more_than_it_holds_is_named(tmp_path):
    path = tmp_path / "train-images-idx3-ubyte.gz"
    header = bytes([0, 0, 8, 3]) + b"".join(d.to_bytes(4, "big") for d in (10**6, 28, 28))
    path.write_bytes(gzip.compress(header + b"\0" * 100))
    with pytest.raises(files.CorruptData, match=r"declares \(1000000, 28, 28\)"):
        files.read_idx(path)
    path.write_bytes(gzip.compress(header[:4] + (1).to_bytes(4, "big") + (2).to_bytes(4, "big")
                                   + (2).to_bytes(4, "big") + b"\1\2\3\4"))
    assert files.read_idx(path).shape == (1, 2, 2)
