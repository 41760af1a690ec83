"""The HTML report from small synthetic tables, a tiny PNG and a synthetic claims ledger, built
without Snakemake; its structure is checked with html.parser."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest

from bnstudy import io
from bnstudy.report import build as report
from bnstudy.report import scale

CONTRA = "contradicted at this setting"  # the outcome words (claims/decide/outcomes.py)

VOID = {"img", "meta", "br", "hr", "input", "link"}
IDS = {"experiment": "exp1", "dataset": "toy", "model": "mlp"}


class Tree(HTMLParser):
    """Elements as dicts (tag, attrs, children, text), with every id and internal link."""

    def __init__(self):
        super().__init__()
        self.root = {"tag": "root", "attrs": {}, "children": [], "text": ""}
        self.stack = [self.root]
        self.ids, self.hrefs = [], []

    def handle_starttag(self, tag, attrs):
        node = {"tag": tag, "attrs": dict(attrs), "children": [], "text": "",
                "parents": [n["tag"] for n in self.stack]}
        self.stack[-1]["children"].append(node)
        if "id" in node["attrs"]:
            self.ids.append(node["attrs"]["id"])
        if tag == "a" and node["attrs"].get("href", "").startswith("#"):
            self.hrefs.append(node["attrs"]["href"][1:])
        if tag not in VOID:
            self.stack.append(node)

    def handle_endtag(self, tag):
        if tag in VOID:
            return
        assert self.stack[-1]["tag"] == tag, f"</{tag}> closes <{self.stack[-1]['tag']}>"
        self.stack.pop()

    def handle_data(self, data):
        for node in self.stack:
            node["text"] += data


def walk(node):
    yield node
    for c in node["children"]:
        yield from walk(c)


def parse(text: str) -> Tree:
    tree = Tree()
    tree.feed(text)
    tree.close()
    assert [n["tag"] for n in tree.stack] == ["root"], "unclosed elements"
    return tree


def _claim(cid, claim, verdict, note="", **kw):
    return {"claim_id": cid, "paper": "P", "claim": claim, "quantity": "q", "rule": "r",
            "baseline": "none", "role": "test", "curve": "", "verdict": verdict, "note": note,
            **kw}


@pytest.fixture
def built(tmp_path):
    runs = [{**IDS, "norm": n, "seed": s} for n in ("none", "batchnorm") for s in (0, 1, 2)]
    training = pd.DataFrame([{**r, "step": st, "loss": 1.0 / (st + 1) + r["seed"] * 0.01,
                              "accuracy": 0.5 + st * 0.1, "split": sp, "lr": 0.1,
                              "diverged": False}
                             for r in runs for st in (0, 1) for sp in ("train", "test")])
    gen = pd.DataFrame([{**r, "train_loss": 0.1, "test_loss": 0.2 + r["seed"] * 0.01,
                         "loss_gap": 0.1, "test_accuracy": 0.9, "accuracy_gap": 0.05,
                         "diverged": False} for r in runs])
    num = {"value": 1.0, "baseline_value": 2.0, "effect": -1.0, "ci_low": -1.5,
           "ci_high": -0.5, "cohens_dz": -2.0, "n_seeds": 3}
    ledger = pd.DataFrame([
        _claim("noisy_bn", "noisy BN trains a < b", "undecided", **IDS, norm="batchnorm",
               **num),
        _claim("noisy_bn", "noisy BN trains a < b", "supported", experiment="exp2",
               dataset="toy", model="mlp", norm="batchnorm", **num),
        _claim("ics_grad", "BN does not reduce ICS", CONTRA, **IDS, norm="batchnorm",
               **num),
        _claim("pd_data_vs_zero_bias", "zero bias claim", "not measured",
               note="no experiment runs both zero_bias and one of batchnorm"),
        _claim("dannemann", "Lemma 4.5 fails", "not measured", note="no dannemann table"),
    ])
    paths = []
    for name, df in (("training", training), ("generalization", gen), ("claims", ledger)):
        p = tmp_path / "tables" / f"{name}.parquet"
        p.parent.mkdir(exist_ok=True)
        io.write_table(df, p, {})
        paths.append(str(p))
    figures = []
    for fam in ("training_curves", "generalization_gap"):
        f = tmp_path / "figures" / "exp1" / f"{fam}.png"
        f.parent.mkdir(parents=True, exist_ok=True)
        plt.imsave(f, np.zeros((2, 2, 3)))
        figures.append(str(f))
    config = {"experiments": {"exp1": {"dataset": "toy", "model": "mlp",
                                       "norms": ["none", "batchnorm"], "seeds": [0, 1, 2]}},
              "report": {"title": "synthetic <study>", "ci": 0.95}}
    out = tmp_path / "report.html"
    report.build(config, paths, figures, str(out))
    text = out.read_text(encoding="utf-8")
    return text, parse(text), ledger, figures


def test_no_figure_is_inside_a_closed_fold(built):
    """Figures are visible as the page opens: none sits in a <details> that is not open; the
    config, the provenance and the full ledger are folded."""
    text, tree, _, _ = built
    figures = [n for n in walk(tree.root) if n["tag"] == "img"]
    assert figures
    for f in figures:
        assert "details" not in f["parents"], f["attrs"].get("alt")
    for sid in ("configuration", "provenance", "claims"):
        sec = next(n for n in walk(tree.root) if n["attrs"].get("id") == sid)
        folds = [c for c in sec["children"] if c["tag"] == "details"]
        assert folds and "open" not in folds[0]["attrs"], sid
    css = text[text.index("<style>"):text.index("</style>")]
    assert re.search(r"\.scroll\{[^}]*overflow-x", css) is None  # no table scrolls sideways
    assert re.search(r"td,th\{[^}]*overflow-wrap:anywhere", css)  # long text columns wrap


def test_the_first_screen_holds_the_claim_sentences_then_the_forest_plot(built):
    """Before any deviation list: the one-line caveat (when reduced), one generated sentence per
    tested claim, then the forest plot of the paper tests (a study figure named 'forest': here a
    stand-in PNG, as the forest family is drawn by another module)."""
    text, tree, _, _ = built
    answer = next(n for n in walk(tree.root) if n["attrs"].get("id") == "answer")
    items = [n for n in walk(answer) if n["tag"] == "li"]
    assert [i["attrs"]["data-claim"] for i in items] == ["noisy_bn", "ics_grad"]
    assert items[1]["text"].startswith("BN does not reduce ICS: contradicted at this setting "
                                       "on exp1 (0.37x the plain net's)"), items[1]["text"]
    assert "undecided on exp1" in items[0]["text"] and "supported on exp2" \
        in items[0]["text"]
    assert text.index('class="answers"') < text.index('id="summary"')
    assert not [n for n in walk(answer) if n["tag"] == "figure"]  # no forest figure drawn


def test_a_forest_figure_is_placed_under_the_claim_sentences(tmp_path):
    """STAND-IN: a blank PNG named figures/study/forest.png (the forest family belongs to
    another module) is placed on the first screen, after the sentences, before what the study
    ran, and not repeated in a section."""
    from bnstudy.report import build as b

    forest = tmp_path / "figures" / "study" / "forest.png"
    forest.parent.mkdir(parents=True)
    plt.imsave(forest, np.ones((2, 2, 3)))
    ctx = b._forest(b._figure_index([str(forest)]))  # noqa: SLF001
    assert ctx is not None and ctx["data"]
    papers = [{"paper": "Santurkar et al.", "protocols": [
        {"protocol": "a VGG on CIFAR-10", "same": [], "lines": [("8x8 digits", ["digits"])]}]}]
    html = b.render(_context(forest=ctx, papers=papers))
    i_sentence, i_fig = html.index('class="answers"'), html.index('id="fig-forest"')
    assert i_sentence < i_fig < html.index('id="summary"') < html.index('class="papers"')
    assert html.index("Reduced scale.") < i_sentence
    assert b._forest({}) is None  # noqa: SLF001


def _context(**over) -> dict:
    base = {"title": "t", "level_pct": "95%", "answers": [{"claim_id": "c", "text": "C: x."}],
            "answer_others": "", "papers": [], "forest": None,
            "scale": {"reduced": True, "runs": 2, "diverged": 0, "experiments": [],
                      "protocols": {}, "paper_scale": [], "study_deviations": []},
            "found": {"rows": [], "unmeasured": []}, "sections": [], "ledger": [], "prose": [],
            "rounds": [], "variance": "", "config_yaml": "", "provenance": ""}
    return {**base, **over}


def test_every_toc_link_resolves_to_an_id(built):
    text, tree, _, _ = built
    assert len(tree.ids) == len(set(tree.ids)), "duplicate ids"
    assert tree.hrefs and set(tree.hrefs) <= set(tree.ids)
    nav = next(n for n in walk(tree.root) if n["tag"] == "nav")
    toc = [n["attrs"]["href"][1:] for n in walk(nav) if n["tag"] == "a"]
    sections = [n["attrs"]["id"] for n in walk(tree.root) if n["tag"] == "section"]
    assert toc == sections  # the TOC lists every section, in order, and nothing else
    assert sections[:2] == ["answer", "summary"]
    assert sections[-2:] == ["configuration", "provenance"]


def test_every_image_is_a_captioned_figure_inlined(built):
    text, tree, _, figures = built
    imgs = [n for n in walk(tree.root) if n["tag"] == "img"]
    assert len(imgs) == len(figures) == text.count("data:image/png;base64,")
    assert all(n["parents"][-1] == "figure" and n["attrs"].get("alt") for n in imgs)
    for fig in (n for n in walk(tree.root) if n["tag"] == "figure"):
        caps = [c for c in fig["children"] if c["tag"] == "figcaption"]
        assert len(caps) == 1 and caps[0]["text"].strip()
    assert 'src="http' not in text and "<link" not in text and "<script" not in text


def test_summary_lists_every_ledger_row(built):
    _, tree, ledger, _ = built
    summary = next(n for n in walk(tree.root) if n["attrs"].get("id") == "findings")
    rows = [n["attrs"] for n in walk(summary) if n["tag"] == "tr" and "data-claim" in n["attrs"]]
    measured = ledger[ledger["verdict"] != "not measured"]
    assert [(r["data-claim"], r["data-where"]) for r in rows] == [
        (c, f"{e}: batchnorm vs none") for c, e in zip(measured["claim_id"],
                                                       measured["experiment"], strict=True)]
    line = [n for n in walk(summary) if n["tag"] == "p" and "Not measured" in n["text"]]
    assert len(line) == 1
    for _, r in ledger[ledger["verdict"] == "not measured"].iterrows():
        assert f"{r['claim_id']} ({r['note']})" in line[0]["text"]
    # the noisy_bn row of exp1 links to the training section's exp1 figures; exp2 (no figures)
    # to the section; ics_grad has no section here, so no link
    links = {a["text"]: a["attrs"]["href"] for a in walk(summary) if a["tag"] == "a"}
    assert links["exp1: batchnorm vs none"] == "#sec-training--exp1"
    assert links["exp2: batchnorm vs none"] == "#sec-training"
    assert "#sec-ics" not in links.values()
    assert "-1 [-1.5, -0.5]" in summary["text"]  # effect and its CI


def test_no_section_without_content_and_order_by_question(built):
    text, tree, _, _ = built
    secs = [n for n in walk(tree.root) if n["tag"] == "section"
            and n["attrs"]["id"].startswith("sec-")]
    # lr_sweep reads the training table but has neither figure nor summary for this study (its
    # findings alone say that no experiment swept the learning rate)
    assert [s["attrs"]["id"] for s in secs] == ["sec-generalization", "sec-training"]
    for s in secs:
        assert any(n["tag"] in ("figure", "table") for n in walk(s))
    assert "synthetic &lt;study&gt;" in text and "a &lt; b" in text  # escaped
    assert "±" in text


def test_ledger_holds_every_row(built):
    _, tree, ledger, _ = built
    claims = next(n for n in walk(tree.root) if n["attrs"].get("id") == "claims")
    body = [n for n in walk(claims) if n["tag"] == "tr"][1:]
    assert len(body) == len(ledger)


def test_order_puts_sections_by_question():
    keys = [s.key for s in report.ordered_sections()]
    # the forest plot's section comes first; its figure is drawn on the first screen
    assert keys[:4] == ["forest", "partition_density", "ics", "smoothness"]
    assert keys.index("teacher_student") < keys.index("dannemann")


def test_intro_counts_the_runs_that_exist_not_norms_times_seeds():
    """Experiments that measure only the teacher-student table have no generalization rows, a
    run has one training row per evaluation step, and a replicated experiment adds seeds to
    some arms only: the opening counts the runs in the tables, and each arm's seeds."""
    config = {"experiments": {
        "ts": {"dataset": "t", "model": "u", "norms": ["none", "batchnorm"], "seeds": [0, 1]},
        "img": {"dataset": "d", "model": "m", "norms": ["batchnorm", "layernorm"],
                "seeds": [0, 1, 2]}}}
    hist = [{"experiment": e, "norm": n, "seed": s, "step": step, "split": "train",
             "diverged": e == "ts" and n == "none" and s == 1 and step == 20}
            for e, n, s in [("ts", "none", 0), ("ts", "none", 1), ("ts", "batchnorm", 0),
                            ("ts", "batchnorm", 1), ("img", "batchnorm", 0),
                            ("img", "batchnorm", 1), ("img", "batchnorm", 2),
                            ("img", "layernorm", 0)]
            for step in (0, 10, 20)]
    gen = pd.DataFrame([{"experiment": "img", "norm": "batchnorm", "seed": s, "step": 20,
                         "diverged": s == 2} for s in (0, 1, 2)] * 2)
    ctx = scale.context(config, {"training": pd.DataFrame(hist), "generalization": gen}, None,
                        [])
    # the old count multiplied every normalizer by the union of seeds: 2*2 + 2*3 = 10
    assert (ctx["runs"], ctx["diverged"]) == (8, 1)
    seeds = {e["name"]: e["seeds"] for e in ctx["experiments"]}
    assert seeds == {"ts": "none, batchnorm: 2 seeds each",
                     "img": "batchnorm 3, layernorm 1 seeds"}
    assert not ctx["reduced"]  # no ledger with deviations
    planned = scale.context(config, {}, None, [])
    assert planned["runs"] == 0 and all(e["planned"] for e in planned["experiments"])


REPRS = ("<built-in", "object at 0x", "<function", "<bound method", "<class '")


def test_no_python_repr_reaches_the_page(built):
    text = built[0]
    found = [r for r in REPRS if r in text]
    assert not found, f"Python reprs on the page: {found}"
    assert "1 vs 2 (none)" in text  # the ledger's means column shows the values themselves


def test_two_builds_from_the_same_tables_are_byte_identical(built, tmp_path):
    text, _, _, figures = built
    tables = [str(tmp_path / "tables" / f"{n}.parquet")
              for n in ("training", "generalization", "claims")]
    config = {"experiments": {"exp1": {"dataset": "toy", "model": "mlp",
                                       "norms": ["none", "batchnorm"], "seeds": [0, 1, 2]}},
              "report": {"title": "synthetic <study>", "ci": 0.95}}
    again = tmp_path / "again.html"
    report.build(config, tables, figures, str(again))
    assert again.read_bytes() == (tmp_path / "report.html").read_bytes()


@pytest.mark.parametrize("mean,half,text", [
    (9.808e-05, 0.00038, "0.00010 ± 0.00038"), (1.2345, 0.0123, "1.234 ± 0.012"),
    (123.456, 7.8, "123.5 ± 7.8"), (-2.5, 1.26, "-2.5 ± 1.3"), (3e-9, 1e-9, "(3.0 ± 1.0)e-09"),
    (0.5, 0.0, "0.5")])
def test_summary_cells_take_their_digits_from_the_interval(mean, half, text):
    from bnstudy.tables.intervals import format_mean_ci

    assert format_mean_ci({"mean": mean, "ci_low": mean - half, "ci_high": mean + half}) == text


def test_summary_tables_have_no_empty_pivot_header(built):
    text = built[0]
    assert "<th>quantity</th>" not in text
    assert not re.search(r"<tr[^>]*>\s*<th></th>", text), "an empty header cell from the pivot"


def test_findings_read_in_words_and_count_by_claim_without_dz_at_three_seeds(built):
    text = built[0]
    assert "d_z=" not in text  # 3 seeds: Cohen's d_z means nothing yet
    assert "By claim:" in text and "by row:" in text


def test_sections_show_their_figures_and_fold_their_method(built):
    """A section keeps the claims whose evidence it holds (their adjusted verdicts) in a line
    above its figures, which are never folded; its method and summary table sit in a
    <details>."""
    _, tree, _, _ = built
    secs = {n["attrs"]["id"]: n for n in walk(tree.root) if n["tag"] == "section"
            and n["attrs"]["id"].startswith("sec-")}
    for s in secs.values():
        details = [c for c in s["children"] if c["tag"] == "details"]
        assert len(details) == 1
        assert not [n for n in walk(details[0]) if n["tag"] == "figure"]
    assert any(n["tag"] == "figure" for s in secs.values() for n in walk(s))
    head = [c for c in secs["sec-training"]["children"] if c["tag"] == "p"
            and "headline" in c["attrs"].get("class", "")]
    assert len(head) == 1
    assert ("noisy_bn: undecided on exp1, supported on exp2"
            in head[0]["text"])
    assert not [c for c in secs["sec-generalization"]["children"]
                if "headline" in c.get("attrs", {}).get("class", "")]
