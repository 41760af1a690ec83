"""Shipping a study's ledger, rounds and report into a tracked folder (bnstudy.report.ship), and
the README's ledgers regenerating from the shipped folders."""

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from bnstudy import io
from bnstudy.claims import markdown
from bnstudy.report import ship

ROOT = Path(__file__).resolve().parents[1]


def _results(tmp_path):
    r = tmp_path / "results"
    led = pd.DataFrame({"claim_id": ["a"], "verdict": ["supported"]})
    io.write_table(led, r / "tables" / "claims.parquet", io.provenance("x", "cpu"))
    (r / "rounds").mkdir()
    (r / "rounds" / "round0.json").write_text("{}")
    (r / "report.html").write_text("<html></html>")
    (r / "report_tables").mkdir()
    (r / "report_tables" / "ledger.csv").write_text("claim_id\na\n")
    (r / "runs" / "e").mkdir(parents=True)
    (r / "runs" / "e" / "history.parquet").write_text("not shipped")
    return r


def test_ship_copies_ledger_rounds_and_report_not_runs(tmp_path):
    r = _results(tmp_path)
    dest = tmp_path / "studies" / "s"
    (dest / "rounds").mkdir(parents=True)
    (dest / "rounds" / "round9.json").write_text("{}")  # from an earlier ship: removed
    got = {p.relative_to(dest).as_posix() for p in ship.ship(r, dest)}
    assert got == {"tables/claims.parquet", "rounds/round0.json", "report.html",
                   "report_tables/ledger.csv"}
    assert not (dest / "runs").exists() and not (dest / "rounds" / "round9.json").exists()
    assert io.read_table(dest / "tables" / "claims.parquet").equals(
        io.read_table(r / "tables" / "claims.parquet"))


def test_ship_refuses_a_corrupt_ledger(tmp_path):
    r = _results(tmp_path)
    p = r / "tables" / "claims.parquet"
    b = bytearray(p.read_bytes())
    b[len(b) // 2] ^= 0xFF
    p.write_bytes(bytes(b))
    with pytest.raises(Exception, match="claims.parquet"):
        ship.ship(r, tmp_path / "dest")
    assert not (tmp_path / "dest").exists()


@pytest.mark.parametrize("doc", ["README.md", "studies/README.md"])
def test_readme_ledgers_are_the_shipped_ones(doc):
    """Every ledger block of the README and of studies/README.md names a shipped folder under
    studies/, and regenerating the blocks (ledgers and job counts) from those folders changes
    nothing (what a fresh clone runs: python -m bnstudy ledger --readme README.md)."""
    path = ROOT / doc
    dirs = [m.group("dir").strip() for m in markdown.BLOCK.finditer(path.read_text("utf-8"))]
    assert dirs, f"{doc} has no ledger blocks"
    for d in dirs:
        shipped = (path.parent / d).resolve()
        assert shipped.parent == ROOT / "studies", (doc, d)
        assert (shipped / "tables" / "claims.parquet").is_file(), (doc, d)
    out = subprocess.run([sys.executable, "-m", "bnstudy", "ledger", "--readme", doc,
                          "--check"], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
