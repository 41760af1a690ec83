"""The figures and reports of a finished tiny study (issue 32): Snakemake's own report reaches
every figure under its family and experiment, each with its family's caption; a change to the
plots settings redraws every figure, and the PDFs embed TrueType (Type 42) fonts."""

from __future__ import annotations

import json
import re
import shutil

import harness
import pytest
import yaml
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
    figures = sorted((project / "results" / "figures").rglob("*.png"))
    shown = {k: v for k, v in res.items() if "/figures/" in k}
    assert {k.split("/figures/")[1] for k in shown} == {
        str(f.relative_to(project / "results" / "figures")) for f in figures}
    labels = [json.dumps(v["labels"], sort_keys=True) for v in shown.values()]
    assert len(set(labels)) == len(labels), "two figures share labels: only one is reachable"
    plots.load_all()
    for path, v in shown.items():
        family = path.rsplit("/", 1)[1].removesuffix(".png")
        assert v["labels"]["family"] == family and v["labels"]["experiment"] == path.split("/")[-2]
        words = " ".join(plots.FAMILIES[family].caption.split()[:6])
        assert words in re.sub(r"\s+", " ", v["caption"]), (family, v["caption"][:200])
    # the ledger and the summaries as CSV, which the report can show
    tables = {v["name"] for v in res.values()}
    assert {"ledger.csv", "summaries.csv"} <= tables


def test_a_formats_change_redraws_every_figure_as_type42_pdfs(local_study, tmp_path):
    project = tmp_path / "project"  # a copy: the shared study stays as it is
    shutil.copytree(local_study["project"], project, symlinks=True)
    # the same study moved on purpose (bnstudy.planning.lock refuses a changed config from
    # another working directory until its record goes)
    (project / "results" / ".bnstudy-study.json").unlink()
    cfg_path = project / "config" / "config.yaml"
    cfg = yaml.safe_load(cfg_path.read_text())
    cfg["plots"] = {**cfg.get("plots", {}), "formats": ["pdf"]}
    cfg_path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    jobs = dry_run(project)
    counts = job_counts(jobs)
    drawn = {p.stem for p in (project / "results" / "figures").rglob("*.png")}
    assert {r for r in counts if r.startswith("plot_")} == {f"plot_{f}" for f in drawn}
    assert not {r for r in counts if r in ("train", "aggregate")}, counts
    snakemake(project, "--cores", "2")
    pdfs = sorted((project / "results" / "figures").rglob("*.pdf"))
    assert len(pdfs) == len(list((project / "results" / "figures").rglob("*.png")))
    for pdf in pdfs:
        data = pdf.read_bytes()
        assert not re.search(rb"/Subtype\s*/Type3", data), f"{pdf} embeds Type 3 fonts"
        assert re.search(rb"/Subtype\s*/(TrueType|Type0)", data), pdf
