"""The report says what it measured (issue 32): its scale and the papers' protocols first, the
headline counting only paper tests, verdicts in words a reader cannot misread, each interval
at its own level, the runs that exist, and every text escaped."""

from __future__ import annotations

import html
import re
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest

from bnstudy import io, plots
from bnstudy.claims.say import words
from bnstudy.report import build as report
from bnstudy.report import scale

REPO = Path(__file__).resolve().parents[1]
IDS = {"experiment": "star", "dataset": "star2d", "model": "mlp"}
DEV = "lr 1e-3 vs the paper's 1e-2; 600 of 10,000 steps; star2d MLP, not VGG/CIFAR-10"
NUM = {"value": 1.0, "baseline_value": 2.0, "effect": 1.74, "ci_low": 1.2, "ci_high": 2.3,
       "cohens_dz": 2.0, "n_seeds": 3, "interval_level": 0.95}


def _row(cid, verdict, role="test", **kw):
    return {"claim_id": cid, "paper": "Santurkar et al.", "claim": f"claim {cid}",
            "quantity": "q", "rule": "less", "baseline": "none", "role": role, "curve": "",
            "verdict": verdict, "adjusted_verdict": verdict, "note": "", **IDS,
            "norm": "batchnorm", **NUM, "deviations": DEV,
            "protocol": "VGG on CIFAR-10, 15k steps, batch 128", **kw}


@pytest.fixture
def page(tmp_path, monkeypatch):
    runs = [("none", s) for s in range(12)] + [("batchnorm", s) for s in range(12)] + [
        ("layernorm", s) for s in range(3)]
    training = pd.DataFrame([{**IDS, "norm": n, "seed": s, "step": st, "loss": 1.0,
                              "split": "train", "diverged": False}
                             for n, s in runs for st in (0, 10)])
    ledger = pd.DataFrame([
        _row("lipschitz", "contradicted at this setting"),
        _row("ics_grad", "supported", interval_level=0.983),
        _row("grad_pred", "undecided"),
        _row("prop2_mu", "supported", role="implementation check"),
        _row("prop2_deep_mu", "contradicted at this setting", role="beyond the paper"),
        _row("resnet_ics", "contradicted at this setting", role="beyond the paper"),
        _row("dannemann", "supported", effect=np.nan, ci_low=np.nan, ci_high=np.nan,
             experiment=""),
        _row("noisy_bn", "not measured", effect=np.nan, deviations="", note="no noisy BN"),
    ])
    paths = []
    for name, df in (("training", training), ("claims", ledger)):
        p = tmp_path / "tables" / f"{name}.parquet"
        p.parent.mkdir(exist_ok=True)
        io.write_table(df, p, {})
        paths.append(str(p))
    fig = tmp_path / "figures" / "star" / "training_curves.png"
    fig.parent.mkdir(parents=True)
    plt.imsave(fig, np.zeros((2, 2, 3)))
    # a section whose findings hold literal angle brackets (Dannemann's do)
    plots.load_all()
    section = plots.SECTIONS["training"]
    monkeypatch.setitem(plots.SECTIONS, "training", type(section)(
        **{**section.__dict__, "findings": lambda frames: "<grad, W*> = 1e-9 and <W*, W0>"}))
    config = {"experiments": {"star": {"dataset": "star2d", "model": "mlp", "training": "sgd",
                                       "norms": ["none", "batchnorm", "layernorm"],
                                       "seeds": list(range(12))}},
              "datasets": {"star2d": {"kind": "star2d", "options": {"n_train": 64}}},
              "models": {"mlp": {"arch": "mlp", "depth": 3, "width": 16}},
              "trainings": {"sgd": {"lr": 0.05, "batch_size": 16, "steps": 600}},
              "report": {"ci": 0.95}}
    out = tmp_path / "report.html"
    report.build(config, paths, [str(fig)], str(out),
                 paper_configs=[str(REPO / "config" / "studies" / "santurkar_paper.yaml")])
    return out.read_text(encoding="utf-8"), out


def _visible(text: str) -> str:
    return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", text)))


def test_the_report_opens_with_its_scale_and_deviations(page):
    text, _ = page
    top = text[:text.index('id="contents"')]
    assert "Reduced scale." in top and "reduced scale" in top
    seen = _visible(top)
    for part in DEV.split("; "):
        assert part in seen  # each deviation
    assert "star2d (n_train 64); mlp (depth 3, width 16); 600 steps" in seen
    assert "VGG on CIFAR-10, 15k steps, batch 128" in seen  # the paper's protocol
    # the paper-scale config and its generated cost
    block = (Path(__file__).resolve().parents[1] / "config/studies/santurkar_paper.yaml")
    block = block.read_text()
    gpu = re.search(r"#   total +\d+ +[\d.]+ +([\d.]+) ", block).group(1)  # the generated block
    assert re.search(rf"config/studies/santurkar_paper.yaml: \d+ jobs, about {re.escape(gpu)} "
                     r"GPU-hours", seen), gpu


def test_runs_and_seeds_per_arm_are_the_runs_that_exist(page):
    text, _ = page
    seen = _visible(text)
    assert "trained 27 runs (0 diverged)" in seen  # not 3 normalizers x 12 seeds = 36
    assert "none 12, batchnorm 12, layernorm 3 seeds" in seen
    # the figure's caption states its seeds per arm too
    caps = re.findall(r"<figcaption>(.*?)</figcaption>", text, re.S)
    assert caps and all("seeds per arm: none 12, batchnorm 12, layernorm 3" in c for c in caps)


def test_the_headline_counts_paper_tests_apart_from_other_rows(page):
    text, _ = page
    seen = _visible(text[text.index('id="findings"'):])
    assert "Paper tests (3 rows, 2 decided; 3 claims)" in seen
    by_row = seen[seen.index("by row:"):seen.index("Counted apart")]
    assert "1 supported" in by_row and "1 contradicted at this setting" in by_row
    assert "1 undecided" in by_row and "beyond" not in by_row
    apart = seen[seen.index("Counted apart"):]
    for k in ("exact computation", "implementation check", "by construction",
              "beyond the paper"):
        assert k in apart


def test_verdicts_read_as_words_and_mixed_is_defined(page):
    text, _ = page
    seen = _visible(text)
    assert "contradicted at this setting" in seen and "undecided" in seen
    assert f"mixed {words.VERDICT_MEANING['mixed']}" in seen
    with pytest.raises(ValueError, match="unknown verdict 'maybe'"):
        words.verdict_word("maybe")


def test_each_interval_says_its_own_level(page):
    text, _ = page
    seen = _visible(text[text.index('id="findings"'):text.index('id="claims"')])
    assert "5.7 [1.2, 2.3]" not in seen
    assert "1.74 [1.2, 2.3] (95% CI)" in seen and "1.74 [1.2, 2.3] (98.3% CI)" in seen
    assert "95% CI]" not in seen  # no column header claims one level for every row


def test_no_text_reaches_the_page_unescaped(page):
    text, _ = page
    body = text[text.index("<body>"):]
    tags = {"html", "head", "body", "main", "section", "nav", "h1", "h2", "h3", "p", "ul",
            "ol", "li", "a", "b", "i", "br", "small", "span", "div", "table", "thead", "tbody",
            "tr", "th", "td", "details", "summary", "figure", "figcaption", "img", "pre", "dl",
            "dt", "dd", "code"}
    opened = {m.lower() for m in re.findall(r"</?([A-Za-z][A-Za-z0-9]*)", body)}
    assert opened <= tags, f"text read as tags: {opened - tags}"
    assert "&lt;grad, W*&gt;" in body and "&lt;W*, W0&gt;" in body


def test_contents_come_before_the_findings_and_the_full_ledger_is_collapsed(page):
    text, _ = page
    assert text.index('id="contents"') < text.index('id="findings"')
    claims = text[text.index('<section id="claims"'):text.index('id="configuration"')]
    assert "<details" in claims.split("<table")[0]
    assert "@media print" in text and "details-content" in text


def test_the_csv_tables_beside_the_report(page):
    _, out = page
    folder = report.tables_dir(out)
    ledger = pd.read_csv(folder / "ledger.csv")
    assert len(ledger) == 8 and "deviations" in ledger
    summaries = pd.read_csv(folder / "summaries.csv")
    assert {"section", "quantity", "mean", "ci_low", "ci_high"} <= set(summaries.columns)


def test_paper_config_header_parses(tmp_path):
    cfg = tmp_path / "x_paper.yaml"
    cfg.write_text("# X et al. 2018 at paper scale: VGG on CIFAR-10.\n# More.\n#   snakemake\n"
                   "# -- cost (generated: python -m bnstudy check --cluster --cost-header "
                   "FILE; do not edit) --\n#   total   12   1.0   3.50   40.00\n"
                   "# -- end cost --\nresults: r\n")
    info = scale.paper_config(cfg)
    assert info["about"] == "X et al. 2018 at paper scale: VGG on CIFAR-10."
    assert (info["jobs"], info["gpu_hours"], info["cpu_hours"]) == (12, 3.5, 40.0)
    assert "gpu_hours" not in scale.paper_config(REPO / "config" / "studies" / "luo.yaml")
