"""Shipping a study's ledger, rounds and report into a tracked folder (bnstudy.report.ship),
studies/README.md's ledgers regenerating from the shipped folders, and the README's summary
table stating them."""

import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from bnstudy import io
from bnstudy.claims.say import markdown
from bnstudy.report import readme, ship

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


def test_studies_readme_ledgers_are_the_shipped_ones():
    """Every ledger block of studies/README.md names a shipped folder under studies/, every
    shipped folder has one, and regenerating the blocks (ledgers and job counts) from those
    folders changes nothing (what a fresh clone runs: python -m bnstudy ledger --readme
    studies/README.md)."""
    doc = "studies/README.md"
    path = ROOT / doc
    dirs = [m.group("dir").strip() for m in markdown.BLOCK.finditer(path.read_text("utf-8"))]
    assert dirs, f"{doc} has no ledger blocks"
    for d in dirs:
        shipped = (path.parent / d).resolve()
        assert shipped.parent == ROOT / "studies", (doc, d)
        assert (shipped / "tables" / "claims.parquet").is_file(), (doc, d)
    assert {p.parents[1].name for p in _shipped()} == set(dirs)
    out = subprocess.run([sys.executable, "-m", "bnstudy", "ledger", "--readme", doc,
                          "--check"], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


def _shipped() -> list[Path]:
    return sorted((ROOT / "studies").glob("*/tables/claims.parquet"))


def _slug(heading: str) -> str:
    """GitHub's anchor of a Markdown heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def test_readme_summary_states_the_shipped_ledgers():
    """The README holds no ledger (studies/README.md does) but a table of the studies, each
    linked to its section of studies/README.md (the anchor exists), and a generated verdicts
    block naming every shipped study, with each report linked; regenerating it from the shipped
    ledgers changes nothing; a study with no shipped ledger says so."""
    text = (ROOT / "README.md").read_text("utf-8")
    assert not markdown.BLOCK.search(text), "the README's ledgers live in studies/README.md"
    anchors = {_slug(h) for h in re.findall(r"^#+ (.+)$",
                                             (ROOT / "studies" / "README.md").read_text("utf-8"),
                                             re.M)}
    rows = {m.group(1): m for m in re.finditer(
        r"^\| \[`(\w+)`\]\(studies/README\.md#([\w-]+)\) \|(.*)\|$", text, re.M)}
    shipped = {p.parents[1].name for p in _shipped()}
    assert shipped <= set(rows), sorted(shipped - set(rows))
    for name, m in rows.items():
        assert m.group(2) in anchors, (name, m.group(2))
        if name not in shipped:
            assert "no ledger shipped" in m.group(3), name
    blocks = list(readme.BLOCK.finditer(text))
    assert len(blocks) == 1
    assert {Path(d).name for d in blocks[0].group("dirs").split()} == shipped
    for name in shipped:
        assert f"| [report](studies/{name}/report.html) |" in blocks[0].group("body"), name
        assert (ROOT / "studies" / name / "report.html").is_file(), name
    out = subprocess.run([sys.executable, "-m", "bnstudy", "ledger", "--readme", "README.md",
                          "--check"], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


def test_the_verdicts_table_counts_paper_tests_by_adjusted_verdict(tmp_path):
    """An independent count on a hand-made ledger: two paper tests of one claim (one supported
    after Holm, one not supported before Holm but undecided after), an implementation check and
    an unmeasured row."""
    rows = [dict(claim_id="a", role="test", verdict="supported", adjusted_verdict="supported"),
            dict(claim_id="a", role="test", verdict="contradicted at this setting",
                 adjusted_verdict="undecided"),
            dict(claim_id="b", role="implementation check", verdict="supported",
                 adjusted_verdict="supported"),
            dict(claim_id="c", role="test", verdict="not measured", adjusted_verdict=None)]
    c = readme.counts(pd.DataFrame(rows))
    assert c == {"tests": 2, "claims": 1, "other": {"implementation check": 1},
                 "verdicts": {"supported": 1, "contradicted at this setting": 0,
                              "absent at this setting": 0, "undecided": 1}}


def test_a_shipped_study_lists_its_measure_tables_and_redraws_its_figures(tmp_path):
    """`ship` carries the aggregated tables the figures are drawn from (zstd-compressed, same
    rows and provenance, not the runs), so results.load on the shipped folder lists them and a
    plot function draws from them without the study's runs."""
    import matplotlib
    import pyarrow.parquet as pq

    from bnstudy import results

    matplotlib.use("Agg")
    r = _results(tmp_path)
    ids = {"experiment": "e", "dataset": "toy", "model": "mlp"}
    training = pd.DataFrame([{**ids, "norm": n, "seed": s, "step": st, "split": sp,
                              "loss": 1.0 / (st + 1) + s * 0.01, "accuracy": 0.5 + 0.04 * st,
                              "lr": 0.1, "diverged": False}
                             for n in ("none", "batchnorm") for s in (0, 1) for st in (0, 5, 10)
                             for sp in ("train", "test")])
    io.write_table(training, r / "tables" / "training.parquet", io.provenance("h", "cpu"))
    dest = tmp_path / "studies" / "s"
    ship.ship(r, dest)
    shipped = results.load(dest)
    assert shipped.names() == ["claims", "training"]
    assert shipped["training"].equals(io.read_table(r / "tables" / "training.parquet"))
    assert shipped.provenance("training")["config_hash"] == "h"
    codec = pq.ParquetFile(dest / "tables" / "training.parquet").metadata.row_group(0).column(0)
    assert codec.compression == "ZSTD"
    assert (dest / "tables" / "claims.parquet").read_bytes() == \
        (r / "tables" / "claims.parquet").read_bytes()  # the ledger byte for byte
    png = shipped.plot("training_curves", tmp_path / "curves.png", experiment="e")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(ValueError, match="per experiment: name one"):
        shipped.plot("training_curves", tmp_path / "x.png")
    assert ship.size_mb(dest) < 1


def test_every_study_config_is_shipped_with_its_papers_tests():
    """All five studies ship a ledger (issue 48): the default study and each study config
    under config/studies/ (not the paper-scale ones), and each ledger measures some of the
    paper tests its paper is named for (luo: Luo et al.'s rows)."""
    names = {"default"} | {p.stem for p in (ROOT / "config" / "studies").glob("*.yaml")
                           if not p.stem.endswith("_paper")}
    assert names == {"default", "santurkar", "balestriero", "luo", "dannemann"}
    shipped = {p.parents[1].name for p in _shipped()}
    assert names <= shipped, sorted(names - shipped)
    claims = io.read_table(ROOT / "studies" / "luo" / "tables" / "claims.parquet")
    measured = set(claims.loc[claims["verdict"] != "not measured", "claim_id"])
    assert {"luo_sgd", "luo_bn", "luo_wn", "luo_pn"} <= measured, sorted(measured)
