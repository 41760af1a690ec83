"""The figures and reports of a finished tiny study (issue 32): Snakemake's own report reaches
every figure (its PNG and its PDF: the tiny study sets ``plots.formats: [pdf]``) under its
family and experiment, each with its family's caption; a change to the plots settings redraws
every figure, and the PDFs embed TrueType (Type 42) fonts."""

from __future__ import annotations

import json
import re

import harness
import pytest
from harness import dry_run, job_counts, snakemake

from bnstudy import plots

pytestmark = pytest.mark.workflow


@pytest.fixture(scope="module")
def local_study(tmp_path_factory) -> dict:
    return harness.local_study(tmp_path_factory)


def _results(html: str) -> dict:
    m = re.search(r"var results = (\{.*?\});\s*</script>", html, re.S)
    assert m, "no results in Snakemake's report"
    return json.loads(m.group(1))


def test_snakemake_report_reaches_every_figure_with_its_caption(local_study, tmp_path):
    project = local_study["project"]
    out = tmp_path / "snakemake_report.html"
    snakemake(project, "--report", str(out))
    res = _results(out.read_text())
    figures = sorted((project / "results" / "figures").rglob("*.*"))
    assert {f.suffix for f in figures} == {".png", ".pdf"}, figures
    shown = {k: v for k, v in res.items() if "/figures/" in k}
    assert {k.split("/figures/")[1] for k in shown} == {
        str(f.relative_to(project / "results" / "figures")) for f in figures}
    labels = [json.dumps(v["labels"], sort_keys=True) for v in shown.values()]
    assert len(set(labels)) == len(labels), "two figures share labels: only one is reachable"
    plots.load_all()
    for path, v in shown.items():
        family, fmt = path.rsplit("/", 1)[1].rsplit(".", 1)
        assert v["labels"]["family"] == family and v["labels"]["experiment"] == path.split("/")[-2]
        assert v["labels"]["format"] == fmt, v["labels"]
        words = " ".join(plots.FAMILIES[family].caption.split()[:6])
        assert words in re.sub(r"\s+", " ", v["caption"]), (family, v["caption"][:200])
    # issue 46: the forest plot of the paper tests is among them, PNG and PDF
    assert {"study/forest.png", "study/forest.pdf"} <= {k.split("/figures/")[1] for k in shown}
    # the ledger and the summaries as CSV, which the report can show
    tables = {v["name"] for v in res.values()}
    assert {"ledger.csv", "summaries.csv"} <= tables


def test_the_study_report_opens_with_the_forest_plot_of_its_paper_tests(local_study):
    """Issue 46: the tiny study's own HTML report shows the forest plot, in the first of its
    figure sections."""
    html = (local_study["results"] / "report.html").read_text()
    assert 'id="fig-forest"' in html
    first = re.search(r'id="(fig-[\w-]+)"', html)
    assert first and first.group(1) == "fig-forest", first and first.group(1)


def test_every_figure_has_a_type42_pdf_and_a_formats_change_redraws_every_figure(
        local_study):
    """The tiny study draws each figure as PNG and PDF (``plots.formats: [pdf]``, as one job
    writes them): every PDF embeds its fonts as TrueType (Type 42), never Type 3. Another
    formats setting redraws every figure and runs nothing else (the report excepted: it lists
    the files)."""
    project = local_study["project"]
    figures = project / "results" / "figures"
    pngs, pdfs = sorted(figures.rglob("*.png")), sorted(figures.rglob("*.pdf"))
    assert [p.with_suffix("") for p in pdfs] == [p.with_suffix("") for p in pngs], pdfs
    for pdf in pdfs:
        data = pdf.read_bytes()
        assert not re.search(rb"/Subtype\s*/Type3", data), f"{pdf} embeds Type 3 fonts"
        assert re.search(rb"/Subtype\s*/(TrueType|Type0)", data), pdf
    cfg = harness.tiny_config(project, results="results")
    assert cfg["plots"]["formats"] == ["pdf"], cfg["plots"]
    cfg["plots"]["formats"] = ["pdf", "svg"]
    harness.write_config(project / "formats.yaml", cfg)
    counts = job_counts(dry_run(project, "--configfile", "formats.yaml"))
    assert {r for r in counts if r.startswith("plot_")} == {
        f"plot_{p.stem}" for p in pngs}, counts
    assert set(counts) - {r for r in counts if r.startswith("plot_")} <= {
        "report", "job_arguments"}, counts
