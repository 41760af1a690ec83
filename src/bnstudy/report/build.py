"""The final, self-contained HTML report (figures embedded as base64 PNG), rendered from the
Jinja2 template of :mod:`bnstudy.report.template`.

It opens with the answer (:mod:`bnstudy.report.answer`: a one-line reduced-scale caveat, one
sentence per claim, the forest plot of the paper tests when the study drew one), then what the
study ran and at what scale (:mod:`bnstudy.report.scale`: runs and
seeds per arm, each experiment's setting and its deviations from the papers' protocols, the
paper-scale configs), what it found in sentences, and the table of contents; then the findings
table (the claims ledger's paper tests, each linked to its evidence, the other rows counted
apart: :mod:`bnstudy.report.summary`), and the sections of :mod:`bnstudy.plots` ordered by
question (each section's ``rank``): each shows its figures per experiment with captions (each
stating its seeds per arm) and a summary table of mean ± CI (Student t, 95% by default) over
seeds; a section with neither figure nor summary rows is left out. The full claims ledger
(collapsed), the study config and the provenance of every table close the report. Every text
is escaped (findings too: they are plain text). Beside the report, ``<stem>_tables/`` holds the
ledger and the summary tables as CSV for Snakemake's report (:func:`write_tables`).
"""

from __future__ import annotations

import base64
import re
from pathlib import Path

import jinja2
import pandas as pd
import yaml

from bnstudy import io, plots
from bnstudy.report import answer as report_answer
from bnstudy.report import prose as report_prose
from bnstudy.report import rounds as report_rounds
from bnstudy.report import scale as report_scale
from bnstudy.report import summary as report_summary
from bnstudy.report import template as report_template
from bnstudy.report import variance as report_variance
from bnstudy.tables import intervals, layout

# The study figure shown on the first screen, under the claim sentences (the forest plot of the
# paper tests), when the study drew it; it is not repeated in a section
FIRST_SCREEN = "forest"

# Sections by question: partition density, ICS, smoothness, generalization and training, BN
# jitter, teacher-student, the counterexample; sections not listed follow in registration order.


def _figure_index(figures: list[str]) -> dict[tuple[str, str], Path]:
    """Map (family, experiment) to the figure file: results/figures/<experiment>/<family>.png."""
    return {(f.stem, f.parent.name): f for f in map(Path, figures)}


def _png(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode()


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]+", "-", str(text)).strip("-") or "x"


def _last_steps(df: pd.DataFrame) -> pd.DataFrame:
    keys = [c for c in ("experiment", "norm", "seed") if c in df.columns]
    last = df.groupby(keys)["step"].transform("max")
    return df[df["step"] == last]


def summary_long(df: pd.DataFrame, section: plots.Section, level: float) -> tuple:
    """(the section's summary over seeds in long form, its grouping columns); None when the
    table lacks the summarized columns."""
    if section.summary_filter.get("last_step"):
        df = _last_steps(df)
    by = [c for c in layout.GROUP if c in df.columns]
    for extra in ("split", "layer", "point_set"):
        if extra in df.columns and extra in section.summary_filter.get("by", ("split",)):
            by.append(extra)
    cols = [c for c in section.summary_columns if c in df.columns]
    if not cols or df.empty:
        return None, by
    return intervals.summarize(df, cols, by=by, level=level), by


def summary_table(df: pd.DataFrame, section: plots.Section, level: float) -> str:
    s, by = summary_long(df, section, level)
    if s is None:
        return ""
    cols = [c for c in section.summary_columns if c in set(s["quantity"])]
    s["value"] = s.apply(intervals.format_mean_ci, axis=1)
    wide = s.pivot_table(index=by, columns="quantity", values="value", aggfunc="first")
    wide = wide[[c for c in cols if c in wide.columns]]
    wide.columns.name = None  # the pivot's "quantity" would print as an empty header column
    n = s.groupby(by)["n_runs"].first()
    wide.insert(0, "seeds", n)
    return wide.reset_index().to_html(index=False, na_rep="n/a", border=0)


def ordered_sections() -> list[plots.Section]:
    """The report's sections in their order: each section's ``rank``, then its key."""
    plots.load_all()
    return sorted(plots.SECTIONS.values(), key=lambda s: (s.rank, s.key))


def section_context(section: plots.Section, frames: dict[str, pd.DataFrame],
                    figs: dict[tuple[str, str], Path], experiments: list[str],
                    level: float, arms: dict[str, dict[str, int]] | None = None) -> dict | None:
    """The template's view of one section, or None when it has no figure and no summary rows
    for this study (no table, or a table whose summarized columns it lacks)."""
    if section.table not in frames:
        return None
    sid = "sec-" + _slug(section.key)
    table = frames[section.table]
    if arms and "experiment" in table:  # a study figure: the experiments its table holds
        held = {str(e) for e in table["experiment"].unique()}
        arms = {e: a for e, a in arms.items() if e in held}
    groups = []
    for scope in ["study", *experiments]:
        figures = []
        for fam_name in section.families:
            if fam_name == FIRST_SCREEN:
                continue
            fam = plots.FAMILIES[fam_name]
            if (fam.scope == "experiment") != (scope != "study") or (fam_name, scope) not in figs:
                continue
            where = "whole study" if scope == "study" else f"experiment {scope}"
            figures.append({"id": f"fig-{_slug(fam_name)}-{_slug(scope)}",
                            "alt": f"{fam_name} ({where})", "data": _png(figs[fam_name, scope]),
                            "caption": f"{fam.caption} [{where}; {_arms(arms, scope)}]"})
        if figures:
            heading = None if scope == "study" else f"Experiment {scope}"
            groups.append({"id": f"{sid}--{scope}", "heading": heading, "figures": figures})
    table_html = summary_table(frames[section.table], section, level)
    if not groups and not table_html:
        return None
    findings = section.findings(frames) if section.findings is not None else ""
    return {"id": sid, "key": section.key, "title": section.title, "text": section.text,
            "groups": groups, "findings": findings, "table": table_html}


def _arms(arms: dict[str, dict[str, int]] | None, scope: str) -> str:
    """'seeds per arm: none 12, batchnorm 12, layernorm 3' of an experiment (every experiment's
    for a study figure)."""
    if not arms:
        return "seeds per arm: see the summary"
    if scope != "study":
        return f"seeds per arm: {report_scale.seeds_text(arms.get(scope, {}))}"
    return "seeds per arm: " + "; ".join(f"{e} {report_scale.seeds_text(a)}"
                                         for e, a in arms.items())


def build(config: dict, table_paths: list[str], figures: list[str], out: str,
          paper_configs: list[str] | tuple = ()) -> None:
    level = float(config.get("report", {}).get("ci", 0.95))
    title = config.get("report", {}).get("title", "bnstudy report")
    frames = {Path(p).stem: io.read_table(p) for p in table_paths}
    figs = _figure_index(figures)
    experiments = sorted(config.get("experiments", {}))
    arms = report_scale.arms(config, frames)
    sections = [c for c in (section_context(s, frames, figs, experiments, level, arms)
                            for s in ordered_sections()) if c is not None]
    section_of: dict[str, tuple[str, str]] = {}
    for ctx in sections:
        table = plots.SECTIONS[ctx["key"]].table
        section_of.setdefault(table, (ctx["id"], ctx["title"]))
    groups = {g["id"] for ctx in sections for g in ctx["groups"]}
    ledger = (report_summary.rows(frames["claims"], section_of, groups)
              if "claims" in frames else [])
    lines = report_summary.headlines(ledger)
    for ctx in sections:  # the line a collapsed section shows
        ctx["headline"] = lines.get(ctx["id"], "")
    scale = report_scale.context(config, frames, frames.get("claims"), list(paper_configs))
    settings = {e["name"]: e["setting"] for e in scale["experiments"]}
    for r in ledger:  # each finding names its setting
        r["setting"] = settings.get(r["experiment"], "")
    ledger_df = frames.get("claims")
    doc = render({
        "title": title, "level_pct": f"{level:.0%}", "scale": scale,
        "answers": report_answer.sentences(ledger_df),
        "answer_others": report_answer.others(ledger_df),
        "papers": report_answer.by_paper(ledger_df), "forest": _forest(figs),
        "found": report_summary.found(ledger), "sections": sections, "ledger": ledger,
        "prose": report_prose.paragraphs(ledger),
        "rounds": report_rounds.context(frames.get("replication")),
        "variance": report_variance.table(frames),
        "config_yaml": yaml.safe_dump(config, sort_keys=False),
        "provenance": _provenance(table_paths),
    })
    with io.atomic_path(out) as tmp:
        tmp.write_text(doc, encoding="utf-8")
    write_tables(frames, level, out)


def _forest(figs: dict[tuple[str, str], Path]) -> dict | None:
    """The first screen's figure (:data:`FIRST_SCREEN`, a study figure), None when the study has
    none."""
    path = figs.get((FIRST_SCREEN, "study"))
    if path is None:
        return None
    fam = plots.FAMILIES.get(FIRST_SCREEN)
    caption = fam.caption if fam is not None else "The paper tests: each row's effect and interval."
    return {"data": _png(path), "caption": caption}


def tables_dir(out: str | Path) -> Path:
    """The folder of the report's CSV tables: ``<stem>_tables`` beside the report."""
    out = Path(out)
    return out.with_name(f"{out.stem}_tables")


def write_tables(frames: dict[str, pd.DataFrame], level: float, out: str | Path) -> None:
    """The claims ledger (``ledger.csv``) and every section's summary over seeds in long form
    (``summaries.csv``: section, grouping columns, quantity, mean, CI) beside the report, for
    readers and for Snakemake's report, which shows CSV but not Parquet."""
    folder = tables_dir(out)
    folder.mkdir(parents=True, exist_ok=True)
    ledger = frames.get("claims", pd.DataFrame(columns=["claim_id", "verdict"]))
    with io.atomic_path(folder / "ledger.csv") as tmp:
        ledger.to_csv(tmp, index=False)
    parts = []
    for section in ordered_sections():
        if section.table in frames:
            s, _ = summary_long(frames[section.table], section, level)
            if s is not None:
                parts.append(s.assign(section=section.key))
    long = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=["section"])
    long = long[["section", *[c for c in long.columns if c != "section"]]]
    with io.atomic_path(folder / "summaries.csv") as tmp:
        long.to_csv(tmp, index=False)


def render(context: dict) -> str:
    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined,
                             trim_blocks=True, lstrip_blocks=True)
    env.filters["vclass"] = lambda v: "v-" + _slug(str(v).replace(" ", "-"))
    return env.from_string(report_template.TEMPLATE).render(css=report_template.CSS, **context)


def _provenance(table_paths: list[str]) -> str:
    rows = []
    for p in table_paths:
        prov = io.read_provenance(p)
        rows.append({"table": Path(p).name, **{k: prov.get(k) for k in (
            "config_hash", "bnstudy_version", "torch_version", "device", "cpu", "kernels",
            "git_commit")}})
    return pd.DataFrame(rows).to_html(index=False, border=0)
