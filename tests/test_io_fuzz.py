"""Files that cannot lie: every single-byte change of a table or a checkpoint is detected.

A per-run Parquet table carries the SHA-256 of its bytes (:func:`bnstudy.io.write_table`), so a
change anywhere (data, column names in the pandas metadata, provenance, footer) raises
:class:`bnstudy.io.CorruptFile` naming the file, never another exception and never a silently
different table. The fuzzers flip every byte of a small table and of a tiny checkpoint, with two
patterns each; a read either returns exactly what was written or names the file.
"""

from __future__ import annotations

import hashlib
import math

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from bnstudy import io

PROV = {"config_hash": "0123456789abcdef", "device": "cpu", "runs": 2}
PATTERNS = (0xFF, 0x01)


def small_table() -> pd.DataFrame:
    return pd.DataFrame({"experiment": ["a", "b", "b"], "step": [0, 5, 10],
                         "loss": [0.5, float("nan"), 0.25], "diverged": [False, True, True]})


def classify(read, path, raw: bytes, expected, same) -> dict[str, int]:
    """Flip each byte of ``raw`` with each pattern, write it to ``path`` and ``read`` it back:
    counts of detected (CorruptFile naming the file), harmless (read equals ``expected``),
    silent (a different result) and other (any other exception) changes."""
    counts = {"detected": 0, "harmless": 0, "silent": 0, "other": 0}
    bad = []
    for pattern in PATTERNS:
        for i in range(len(raw)):
            flipped = bytearray(raw)
            flipped[i] ^= pattern
            path.write_bytes(bytes(flipped))
            try:
                got = read(path)
            except io.CorruptFile as e:
                named = str(path) in str(e) and "rerun" in str(e)
                counts["detected" if named else "other"] += 1
                if not named:
                    bad.append((i, pattern, str(e)))
                continue
            except Exception as e:  # noqa: BLE001 (any other exception is a failure)
                counts["other"] += 1
                bad.append((i, pattern, f"{type(e).__name__}: {e}"))
                continue
            if same(got, expected):
                counts["harmless"] += 1
            else:
                counts["silent"] += 1
                bad.append((i, pattern, "silent change"))
    assert not bad, (counts, bad[:5])
    return counts


def same_table(got, expected) -> bool:
    df, prov = got
    try:
        pd.testing.assert_frame_equal(df, expected[0], check_exact=True)
    except AssertionError:
        return False
    return prov == expected[1] and list(df.columns) == list(expected[0].columns)


def test_every_byte_of_a_table_is_covered(tmp_path):
    df = small_table()
    path = tmp_path / "history.parquet"
    io.write_table(df, path, PROV)
    raw = path.read_bytes()
    assert 1_000 < len(raw) < 6_000, len(raw)
    expected = (io.read_table(path), io.read_provenance(path))
    pd.testing.assert_frame_equal(expected[0], df)
    counts = classify(lambda p: (io.read_table(p), io.read_provenance(p)), path, raw,
                      expected, same_table)
    assert counts["silent"] == counts["other"] == 0
    assert counts["detected"] == len(PATTERNS) * len(raw), counts  # every byte is checksummed


def test_the_column_names_and_the_provenance_are_covered(tmp_path):
    """The two silent changes of the old data-only checksum: ``loss`` renamed ``moss`` in the
    pandas metadata, and a provenance value changed."""
    path = tmp_path / "history.parquet"
    io.write_table(small_table(), path, PROV)
    raw = path.read_bytes()
    for old, new in ((b'"loss"', b'"moss"'), (b'0123456789abcdef', b'0123456789abcdee')):
        assert old in raw
        path.write_bytes(raw.replace(old, new))
        with pytest.raises(io.CorruptFile, match="history.parquet is corrupt"):
            io.read_table(path)
        with pytest.raises(io.CorruptFile, match="history.parquet is corrupt"):
            io.read_provenance(path)


def _tensors_equal(a, b) -> bool:
    if torch.is_tensor(a):
        return torch.is_tensor(b) and a.dtype == b.dtype and torch.equal(a, b)
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(
            _tensors_equal(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple):
        return type(a) is type(b) and len(a) == len(b) and all(
            _tensors_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and math.isnan(a):
        return isinstance(b, float) and math.isnan(b)
    return type(a) is type(b) and a == b


@pytest.mark.filterwarnings("ignore:Detected pickle protocol")  # flipped protocol bytes
def test_every_byte_of_a_checkpoint_is_detected_or_harmless(tmp_path):
    blob = {"step": 3, "name": "run", "diverged": False,
            "model": {"w": torch.arange(4, dtype=torch.float32), "b": torch.tensor([1])}}
    path = tmp_path / "checkpoints.pt"
    io.save_pt(blob, path, "checkpoints")
    raw = path.read_bytes()
    counts = classify(lambda p: io.load_pt(p, "checkpoints"), path, raw, blob, _tensors_equal)
    assert counts["silent"] == counts["other"] == 0
    assert counts["detected"] > 0.5 * len(PATTERNS) * len(raw), counts  # the rest: zip padding


# -- every column type the tables can hold round-trips, and its checksum with it -------------

TYPES = {
    "int64": [0, 5, -3],
    "nullable_int": pd.array([1, None, 3], dtype="Int64"),
    "float": [0.5, float("nan"), -float("inf")],
    "bool": [True, False, True],
    "nullable_bool": pd.array([True, None, False], dtype="boolean"),
    "string": ["a", "", "é"],
    "string_with_missing": ["a", None, "c"],
    "list_of_int": [[1, 2], [], [3]],
    "list_of_float": [[0.5], [1.5, float("nan")], []],
    "list_of_str": [["x"], ["y", "z"], []],
    "dict": [{"lr": 0.1}, {"lr": 0.2}, {"lr": 0.3}],
}


def _plain(value):
    if isinstance(value, np.ndarray):
        return [_plain(v) for v in value.tolist()]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


@pytest.mark.parametrize("column", sorted(TYPES))
def test_every_column_type_round_trips_with_its_checksum(tmp_path, column):
    df = pd.DataFrame({"x": TYPES[column]})
    first, second = tmp_path / "a.parquet", tmp_path / "b.parquet"
    io.write_table(df, first, PROV)
    back = io.read_table(first)
    assert repr([_plain(v) for v in back["x"]]) == repr([_plain(v) for v in df["x"]])
    io.write_table(back, second, PROV)  # a table read back is written and verified again
    again = io.read_table(second)
    assert repr([_plain(v) for v in again["x"]]) == repr([_plain(v) for v in df["x"]])
    assert io.read_provenance(second) == PROV


def test_list_columns_pass_whatever_the_list_field_is_called(tmp_path):
    """A list column written as ``list<item>`` reads back as ``list<element>`` (Parquet's name):
    the checksum is of the file's bytes, never of a type's text, so both verify."""
    path = tmp_path / "t.parquet"
    io.write_table(pd.DataFrame({"axis": [[1, 2], [3]]}), path, PROV)
    field = pq.read_table(path).schema.field("axis").type
    assert pa.types.is_list(field)
    io.write_table(io.read_table(path), path, PROV)
    assert [list(v) for v in io.read_table(path)["axis"]] == [[1, 2], [3]]


def test_a_table_of_the_old_format_is_named_not_trusted(tmp_path):
    """A table whose checksum covered only its data (the older format) is refused by name."""
    path = tmp_path / "training.parquet"
    table = pa.Table.from_pandas(small_table(), preserve_index=False)
    meta = {**table.schema.metadata, io.PROVENANCE_KEY: b"{}",
            io.CHECKSUM_KEY: hashlib.sha256(b"data").hexdigest().encode()}
    pq.write_table(table.replace_schema_metadata(meta), path)
    with pytest.raises(io.CorruptFile, match="training.parquet .*older bnstudy"):
        io.read_table(path)


def test_a_value_that_looks_like_the_checksum_changes_nothing(tmp_path):
    """The digest is found as the last ``bnstudy-file-sha256:`` of the file (the footer's
    key-value metadata comes after the data and the column statistics)."""
    path = tmp_path / "t.parquet"
    fake = (io.FILE_MARK + b"0" * 64).decode()
    df = pd.DataFrame({"note": [fake, fake + "x"], "step": [1, 2]})
    io.write_table(df, path, PROV)
    pd.testing.assert_frame_equal(io.read_table(path), df)
    raw = bytearray(path.read_bytes())
    raw[raw.find(io.FILE_MARK) + len(io.FILE_MARK)] ^= 1  # the value's copy, not the digest
    path.write_bytes(bytes(raw))
    with pytest.raises(io.CorruptFile, match="t.parquet is corrupt"):
        io.read_table(path)
