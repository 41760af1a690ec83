"""The final, self-contained HTML report (figures embedded as base64 PNG).

Sections come from :mod:`bnstudy.plots` (text, figure families, summarized columns) in their
registration order; each shows its figures per experiment with captions and a summary table of
mean ± CI (Student t, 95% by default) over seeds. The study config and the provenance of every
table close the report.
"""

from __future__ import annotations

import base64
import html
from pathlib import Path

import pandas as pd
import yaml

from . import io, plots, tables

CSS = """
body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}
h1{border-bottom:2px solid #444} h2{border-bottom:1px solid #aaa;margin-top:2em}
figure{margin:1em 0} figure img{max-width:100%} figcaption{font-size:.9em;color:#444}
table{border-collapse:collapse;font-size:.85em;margin:.5em 0}
td,th{border:1px solid #ccc;padding:2px 6px;text-align:right} th{background:#f0f0f0}
pre{background:#f6f6f6;padding:.8em;overflow-x:auto;font-size:.8em}
"""


def _figure_index(figures: list[str]) -> dict[tuple[str, str], Path]:
    """Map (family, experiment) to the figure file: results/figures/<experiment>/<family>.png."""
    return {(f.stem, f.parent.name): f for f in map(Path, figures)}


def _img(path: Path) -> str:
    data = base64.b64encode(path.read_bytes()).decode()
    return f'<img alt="{html.escape(path.stem)}" src="data:image/png;base64,{data}">'


def _last_steps(df: pd.DataFrame) -> pd.DataFrame:
    keys = [c for c in ("experiment", "norm", "seed") if c in df.columns]
    last = df.groupby(keys)["step"].transform("max")
    return df[df["step"] == last]


def summary_table(df: pd.DataFrame, section: plots.Section, level: float) -> str:
    if section.summary_filter.get("last_step"):
        df = _last_steps(df)
    by = [c for c in tables.GROUP if c in df.columns]
    for extra in ("split", "layer", "point_set"):
        if extra in df.columns and extra in section.summary_filter.get("by", ("split",)):
            by.append(extra)
    cols = [c for c in section.summary_columns if c in df.columns]
    if not cols or df.empty:
        return ""
    s = tables.summarize(df, cols, by=by, level=level)
    s["value"] = s.apply(tables.format_mean_ci, axis=1)
    wide = s.pivot_table(index=by, columns="quantity", values="value", aggfunc="first")
    wide = wide[[c for c in cols if c in wide.columns]]
    n = s.groupby(by)["n_runs"].first()
    wide.insert(0, "seeds", n)
    return wide.reset_index().to_html(index=False, na_rep="n/a", border=0)


def build(config: dict, table_paths: list[str], figures: list[str], out: str) -> None:
    plots.load_all()
    level = float(config.get("report", {}).get("ci", 0.95))
    title = config.get("report", {}).get("title", "bnstudy report")
    frames = {Path(p).stem: pd.read_parquet(p) for p in table_paths}
    figs = _figure_index(figures)
    experiments = sorted(config.get("experiments", {}))
    parts = [f"<h1>{html.escape(title)}</h1>", _intro(config, frames)]
    for section in plots.SECTIONS.values():
        if section.table not in frames:
            continue
        parts.append(f"<h2>{html.escape(section.title)}</h2><p>{html.escape(section.text)}</p>")
        for fam_name in section.families:
            fam = plots.FAMILIES[fam_name]
            scopes = experiments if fam.scope == "experiment" else ["study"]
            for key in [(fam_name, e) for e in scopes]:
                if key in figs:
                    parts.append(f"<figure>{_img(figs[key])}<figcaption>"
                                 f"{html.escape(fam.caption)}</figcaption></figure>")
        if section.findings is not None:
            parts.append(f"<p><b>Findings.</b> {html.escape(section.findings(frames))}</p>")
        table_html = summary_table(frames[section.table], section, level)
        if table_html:
            parts.append(f"<p>Summary: mean ± half-width of the {level:.0%} CI over seeds.</p>")
            parts.append(table_html)
    if "claims" in frames:
        parts.append(claims_section(frames["claims"], level))
    parts.append("<h2>Study configuration</h2><pre>"
                 + html.escape(yaml.safe_dump(config, sort_keys=False)) + "</pre>")
    parts.append("<h2>Provenance</h2>" + _provenance(table_paths))
    doc = ("<!DOCTYPE html><html><head><meta charset='utf-8'><title>" + html.escape(title)
           + f"</title><style>{CSS}</style></head><body>" + "\n".join(parts) + "</body></html>")
    with io.atomic_path(out) as tmp:
        tmp.write_text(doc, encoding="utf-8")


VERDICT_COLOURS = {"supported": "#d4edda", "not supported": "#f8d7da",
                   "inconclusive": "#fff3cd", "not measured": "#e2e3e5"}


def claims_section(ledger: pd.DataFrame, level: float) -> str:
    """The ledger: one row per claim and experiment, verdicts computed from the data."""
    counts = ledger["verdict"].value_counts()
    summary = ", ".join(f"{n} {v}" for v, n in counts.items())
    head = (f"<h2>Claims ledger</h2><p>Each claim of the papers against this study's numbers "
            f"({summary}). The effect is the paired per-seed difference of the stated quantity "
            f"(normalizer minus baseline), with its {level:.0%} Student-t CI over seeds and "
            f"Cohen's d_z; the verdict follows the stated rule from the CI alone. 'not measured' "
            f"means the study did not run what the claim needs. Rows marked [implementation "
            f"check] hold by construction (they check the measurement, not the paper); Luo rows "
            f"name the closed form and constant they are compared with.</p>")
    rows = []
    for _, r in ledger.iterrows():
        colour = VERDICT_COLOURS.get(r["verdict"], "#fff")
        where = " / ".join(str(r[c]) for c in ("experiment", "norm") if c in r and pd.notna(r[c]))
        eff = ""
        if pd.notna(r.get("effect")):
            eff = f"{r['effect']:.3g}"
            if pd.notna(r.get("ci_low")):
                eff += f" [{r['ci_low']:.3g}, {r['ci_high']:.3g}], d_z={r['cohens_dz']:.2g}"
            eff += f" (n={int(r['n_seeds'])})"
        vals = ""
        if pd.notna(r.get("value")):
            vals = f"{r['value']:.4g}"
            if pd.notna(r.get("baseline_value")) and isinstance(r.get("baseline"), str):
                vals += f" vs {r['baseline_value']:.4g} ({html.escape(r['baseline'])})"
        note = html.escape(str(r.get("note") or ""))
        quantity = html.escape(r["quantity"])
        if isinstance(r.get("curve"), str) and r["curve"]:
            quantity += f"<br><i>curve: {html.escape(r['curve'])}</i>"
        role = r.get("role")
        check = (f" <i>[{html.escape(role)}]</i>" if isinstance(role, str) and role != "test"
                 else "")
        rows.append(
            f"<tr><td style='text-align:left'>{html.escape(r['paper'])}{check}</td>"
            f"<td style='text-align:left'>{html.escape(r['claim'])}</td>"
            f"<td style='text-align:left'>{quantity}</td>"
            f"<td>{html.escape(where)}</td><td>{vals}</td><td>{eff}</td>"
            f"<td style='background:{colour}'><b>{html.escape(r['verdict'])}</b></td>"
            f"<td style='text-align:left'>{html.escape(r['rule'])}. {note}</td></tr>")
    return (head + "<table><tr><th>paper</th><th>claim</th><th>quantity</th><th>where</th>"
            "<th>mean: normalizer vs baseline</th><th>effect [CI]</th><th>verdict</th>"
            "<th>rule</th></tr>" + "".join(rows) + "</table>")


def _intro(config: dict, frames: dict[str, pd.DataFrame]) -> str:
    gen = frames.get("generalization")
    runs = len(gen) if gen is not None else 0
    diverged = int(gen["diverged"].sum()) if gen is not None else 0
    exps = config.get("experiments", {})
    items = "".join(
        f"<li><b>{html.escape(n)}</b>: {html.escape(e['dataset'])} / {html.escape(e['model'])},"
        f" normalizers {', '.join(e['norms'])}, seeds {e['seeds']}</li>" for n, e in exps.items()
    )
    return (f"<p>What do normalization layers do to a deep network? This report gathers {runs} "
            f"training runs ({diverged} diverged) over these experiments:</p><ul>{items}</ul>")


def _provenance(table_paths: list[str]) -> str:
    rows = []
    for p in table_paths:
        prov = io.read_provenance(p)
        rows.append({"table": Path(p).name, **{k: prov.get(k) for k in (
            "config_hash", "bnstudy_version", "torch_version", "device", "git_commit")}})
    return pd.DataFrame(rows).to_html(index=False, border=0)
