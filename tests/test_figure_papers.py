"""Figures fit for a paper (issue 32): TrueType fonts in PDFs, the seeds behind each arm on
every figure, markers where the sampling is sparse, bands that cannot stretch an axis (and
say so), teacher-student arms in their normalizer's colour, and Snakemake report labels that
reach every figure."""

from __future__ import annotations

import html as html_mod
import re
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
import seaborn as sns  # noqa: E402

from bnstudy import io, plots  # noqa: E402
from bnstudy.plots import colors  # noqa: E402
from bnstudy.plots.style import CLIP_NOTE, finish, seed_ci  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
import harness  # noqa: E402


def _runs(values: dict[str, list[list[float]]]) -> pd.DataFrame:
    """{norm: [per-seed values over steps 0, 10, 100]} as a long table."""
    return pd.DataFrame([{"norm": n, "seed": s, "step": st, "v": v}
                         for n, seeds in values.items() for s, vs in enumerate(seeds)
                         for st, v in zip((0, 10, 100), vs, strict=True)])


def _lines(df: pd.DataFrame):
    fig, ax = plt.subplots()
    sns.lineplot(df, x="step", y="v", hue="norm", errorbar=seed_ci, ax=ax)
    return fig, ax


def test_a_wild_band_is_clipped_and_says_so():
    # three seeds, one of them far off at the last step: the t band reaches thousands
    fig, ax = _lines(_runs({"none": [[1, 2, 3], [1.1, 2.1, 3.1], [1, 2, 9000]]}))
    assert ax.get_ylim()[1] > 5000
    finish(fig)
    lo, hi = ax.get_ylim()
    assert hi < 5000 and lo > -3000
    assert [t.get_text() for t in ax.texts] == [CLIP_NOTE]
    plt.close(fig)


def test_a_tame_band_is_left_alone_and_sparse_lines_get_markers():
    fig, ax = _lines(_runs({"none": [[1, 2, 3], [1.2, 2.2, 3.1], [0.9, 1.9, 2.9]]}))
    before = ax.get_ylim()
    finish(fig)
    assert ax.get_ylim() == before and not ax.texts
    assert all(ln.get_marker() == "o" for ln in ax.get_lines() if len(ln.get_xdata()) == 3)
    plt.close(fig)


def test_a_dense_line_gets_no_markers():
    fig, ax = plt.subplots()
    ax.plot(range(200), range(200))
    finish(fig)
    assert ax.get_lines()[0].get_marker() in ("None", None, "")
    plt.close(fig)


def test_every_figure_states_its_seeds_per_arm():
    df = pd.DataFrame({"norm": ["none"] * 12 + ["batchnorm"] * 12 + ["layernorm"] * 3,
                       "seed": [*range(12), *range(12), *range(3)]})
    assert plots.seeds_note([df]) == "seeds per arm: none 12, batchnorm 12, layernorm 3"
    assert plots.seeds_note([df[df["norm"] != "layernorm"]]) == (
        "seeds per arm: 12 each (none, batchnorm)")
    assert plots.seeds_note([pd.DataFrame({"alpha": [1.0]})]) == ""


def test_pdf_exports_embed_truetype_fonts(tmp_path, monkeypatch):
    def draw(frames, options):
        fig, ax = plt.subplots()
        ax.plot([0, 1], [0, 1], label="batchnorm")
        ax.set_title("loss ‖∇L‖ vs step")
        return fig

    plots.load_all()
    monkeypatch.setitem(plots.FAMILIES, "t", plots.Family(
        "t", draw, caption="c", tables=("training",), module="training"))
    table = tmp_path / "training.parquet"
    io.write_table(pd.DataFrame({"norm": ["none", "none"], "seed": [0, 1]}), table, {})
    out = tmp_path / "t.png"
    plots.render("t", [str(table)], str(out), {"formats": ["pdf"], "dpi": 40})
    data = (tmp_path / "t.pdf").read_bytes()
    assert not re.search(rb"/Subtype\s*/Type3", data)
    assert re.search(rb"/Subtype\s*/(TrueType|Type0)", data)


def test_arms_take_their_normalizers_colour():
    pal = colors.arm_palette(["batchnorm (full batch)", "batchnorm (batch 8)", "none (batch 8)"])
    assert pal["batchnorm (full batch)"] == colors.norm_color("batchnorm")
    assert pal["none (batch 8)"] == colors.norm_color("none")
    assert pal["batchnorm (batch 8)"] not in (colors.norm_color("batchnorm"),
                                             colors.norm_color("none"))


@pytest.fixture(scope="module")
def plan(tmp_path_factory):
    from bnstudy.config import study
    from bnstudy.planning.plan import Plan

    cfg = harness.tiny_config(plots={"dpi": 60, "formats": ["pdf", "svg"]})
    path = harness.write_config(tmp_path_factory.mktemp("cfg") / "c.yaml", cfg)
    return Plan(study.load([str(path)], {}))


def test_report_labels_reach_every_figure_file(plan):
    for name in plan.figures:
        entries = plan.figure_report_entries(name)
        labels = [tuple(sorted(lab.items())) for _, lab in entries]
        assert len(set(labels)) == len(labels) == len(plan.figure_files(name)), name
        assert {lab["format"] for _, lab in entries} == {"png", "pdf", "svg"}


def test_report_captions_are_the_familys_own_in_escaped_rst(plan):
    from docutils.core import publish_parts

    for name in plan.figures:
        text = plan.figure_caption(name)
        html = publish_parts(text, writer_name="html",
                             settings_overrides={"report_level": 5})["body"]
        assert "system-message" not in html, (name, html[:300])
        shown = " ".join(html_mod.unescape(re.sub(r"<[^>]+>", "", html)).split())
        assert " ".join(plots.FAMILIES[name].caption.split()) in shown, name


def test_classes_and_batch_sizes_never_take_a_normalizers_colour():
    from bnstudy.plots.style import class_cmap

    norm_hues = {c.lower() for c, _ in colors.NORMS.values()}
    cmap = class_cmap(4)
    hexes = {matplotlib.colors.to_hex(cmap(i)) for i in range(4)}
    assert not hexes & norm_hues
    assert not set(colors.other_colors(12)) & norm_hues
