"""The final, self-contained HTML report (figures embedded as base64 PNG), rendered from the
Jinja2 template of :mod:`bnstudy.report.template`.

It opens with what the study found (the claims ledger's verdicts, each linked to its evidence;
:mod:`bnstudy.report.summary`), then a table of contents and the sections of
:mod:`bnstudy.plots` ordered by question (each section's ``rank``): each shows its figures per
experiment with captions and a summary table of mean ± CI (Student t, 95% by default) over
seeds; a section with neither figure nor summary rows is left out. The full claims ledger, the
study config and the provenance of every table close the report.
"""

from __future__ import annotations

import base64
import re
from pathlib import Path

import jinja2
import pandas as pd
import yaml

from bnstudy import io, plots
from bnstudy.report import prose as report_prose
from bnstudy.report import rounds as report_rounds
from bnstudy.report import summary as report_summary
from bnstudy.report import template as report_template
from bnstudy.report import variance as report_variance
from bnstudy.tables import intervals, layout

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


def summary_table(df: pd.DataFrame, section: plots.Section, level: float) -> str:
    if section.summary_filter.get("last_step"):
        df = _last_steps(df)
    by = [c for c in layout.GROUP if c in df.columns]
    for extra in ("split", "layer", "point_set"):
        if extra in df.columns and extra in section.summary_filter.get("by", ("split",)):
            by.append(extra)
    cols = [c for c in section.summary_columns if c in df.columns]
    if not cols or df.empty:
        return ""
    s = intervals.summarize(df, cols, by=by, level=level)
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
                    level: float) -> dict | None:
    """The template's view of one section, or None when it has no figure and no summary rows
    for this study (no table, or a table whose summarized columns it lacks)."""
    if section.table not in frames:
        return None
    sid = "sec-" + _slug(section.key)
    groups = []
    for scope in ["study", *experiments]:
        figures = []
        for fam_name in section.families:
            fam = plots.FAMILIES[fam_name]
            if (fam.scope == "experiment") != (scope != "study") or (fam_name, scope) not in figs:
                continue
            where = "whole study" if scope == "study" else f"experiment {scope}"
            figures.append({"id": f"fig-{_slug(fam_name)}-{_slug(scope)}",
                            "alt": f"{fam_name} ({where})", "data": _png(figs[fam_name, scope]),
                            "caption": f"{fam.caption} [{where}]"})
        if figures:
            heading = None if scope == "study" else f"Experiment {scope}"
            groups.append({"id": f"{sid}--{scope}", "heading": heading, "figures": figures})
    table_html = summary_table(frames[section.table], section, level)
    if not groups and not table_html:
        return None
    findings = section.findings(frames) if section.findings is not None else ""
    return {"id": sid, "key": section.key, "title": section.title, "text": section.text,
            "groups": groups, "findings": findings, "table": table_html}


def build(config: dict, table_paths: list[str], figures: list[str], out: str) -> None:
    level = float(config.get("report", {}).get("ci", 0.95))
    title = config.get("report", {}).get("title", "bnstudy report")
    frames = {Path(p).stem: pd.read_parquet(p) for p in table_paths}
    figs = _figure_index(figures)
    experiments = sorted(config.get("experiments", {}))
    sections = [c for c in (section_context(s, frames, figs, experiments, level)
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
    doc = render({
        "title": title, "level_pct": f"{level:.0%}", "intro": _intro(config, frames),
        "found": report_summary.found(ledger), "sections": sections, "ledger": ledger,
        "prose": report_prose.paragraphs(ledger),
        "rounds": report_rounds.context(frames.get("replication")),
        "variance": report_variance.table(frames),
        "config_yaml": yaml.safe_dump(config, sort_keys=False),
        "provenance": _provenance(table_paths),
    })
    with io.atomic_path(out) as tmp:
        tmp.write_text(doc, encoding="utf-8")


def render(context: dict) -> str:
    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined,
                             trim_blocks=True, lstrip_blocks=True)
    env.filters["vclass"] = lambda v: "v-" + _slug(str(v).replace(" ", "-"))
    return env.from_string(report_template.TEMPLATE).render(css=report_template.CSS, **context)


def _seeds(config: dict, frames: dict[str, pd.DataFrame]) -> dict[str, list[int]]:
    """Each experiment's seeds: those it ran (replication rounds add seeds), else declared."""
    train = frames.get("training")
    ran = ({} if train is None or train.empty else
           {str(e): sorted(int(s) for s in g.unique())
            for e, g in train.groupby("experiment")["seed"]})
    return {n: ran.get(n, list(e["seeds"])) for n, e in config.get("experiments", {}).items()}


def _intro(config: dict, frames: dict[str, pd.DataFrame]) -> dict:
    runs, diverged = _run_counts(config, frames)
    seeds = _seeds(config, frames)
    exps = [{"name": n, "dataset": e["dataset"], "model": e["model"],
             "norms": ", ".join(e["norms"]), "seeds": seeds[n]}
            for n, e in config.get("experiments", {}).items()]
    text = (f"What do normalization layers do to a deep network? This report gathers "
            f"{_count(runs, 'training run')} ({diverged} diverged) over "
            f"{_count(len(exps), 'experiment')} (click for the list).")
    return {"text": text, "experiments": exps}


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def _run_counts(config: dict, frames: dict[str, pd.DataFrame]) -> tuple[int, int]:
    """Training runs and how many diverged: every run of the study (its experiments' norms x
    seeds; each trains once), diverged when any row of its training history says so."""
    seeds = _seeds(config, frames)
    runs = sum(len(e["norms"]) * len(seeds[n]) for n, e in config.get("experiments", {}).items())
    train = frames.get("training")
    if train is None or train.empty or "diverged" not in train:
        return runs, 0
    per_run = train.groupby(["experiment", "norm", "seed"])["diverged"].any()
    return runs, int(per_run.sum())


def _provenance(table_paths: list[str]) -> str:
    rows = []
    for p in table_paths:
        prov = io.read_provenance(p)
        rows.append({"table": Path(p).name, **{k: prov.get(k) for k in (
            "config_hash", "bnstudy_version", "torch_version", "device", "git_commit")}})
    return pd.DataFrame(rows).to_html(index=False, border=0)
