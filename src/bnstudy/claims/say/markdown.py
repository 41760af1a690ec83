"""The claims ledger as Markdown, and the README's ledger blocks regenerated from it.

The README states what each reduced study found. So that no stated number can drift from what
the code produces, those statements are tables generated from each study's
``tables/claims.parquet``: the README holds blocks delimited by::

    <!-- ledger: results/santurkar -->
    ...generated table...
    <!-- /ledger -->

Each row shows its verdict, the multiplicity-adjusted one
(:mod:`bnstudy.claims.decide.multiplicity`) and the seeds it would need
(:mod:`bnstudy.claims.decide.power`), and ``python -m bnstudy ledger --readme README.md`` rewrites
every block from the ledger of the results directory its opening line names (claims the study did
not measure listed in one line under the table; a missing ledger is an error: run the study first).
``python -m bnstudy ledger results/<study>`` prints one study's table.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import pandas as pd

from bnstudy.claims.decide import outcomes as O

BLOCK = re.compile(r"(<!-- ledger: (?P<dir>[^>]+?) -->\n)(?P<body>.*?)(<!-- /ledger -->)",
                   re.DOTALL)
COLUMNS = ("claim", "where", "effect [95% CI]", "in words", "seeds", "verdict",
           "adjusted verdict", "seeds needed", "departs from the paper's setting")


def _num(x) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "n/a"
    x = float(x)
    return f"{x:.3g}" if abs(x) >= 1e-3 or x == 0 else f"{x:.2e}"


def _cell(text) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _where(row: pd.Series) -> str:
    exp, norm = row.get("experiment"), row.get("norm")
    if not isinstance(exp, str) or not exp:
        return row.get("note") or ""
    base = row.get("baseline")
    vs = f" vs {base}" if isinstance(base, str) and base else ""
    extra = [t for t in (row.get("curve"), row.get("role")) if isinstance(t, str) and t
             and t != "test"]
    return f"{exp}: {norm}{vs}" + "".join(f" ({t})" for t in extra)


def _effect(row: pd.Series, base: float = 0.95) -> str:
    eff = row.get("effect")
    if eff is None or (isinstance(eff, float) and math.isnan(eff)):
        value = row.get("value")
        return _num(value) if value is not None and not pd.isna(value) else ""
    lo, hi = row.get("ci_low"), row.get("ci_high")
    if lo is None or pd.isna(lo):
        return _num(eff)
    skewed = " (skewed: effect_skew " + _num(row.get("effect_skew")) + ")" if (
        row.get("skew_flag") is True or row.get("skew_flag") == 1) else ""
    return f"{_num(eff)} [{_num(lo)}, {_num(hi)}]" + level_note(row, base) + skewed


def base_level(ledger: pd.DataFrame) -> float:
    """The study's interval level: the lowest of its rows' (a replicated experiment's rows are
    read at their stopping look's, higher: :mod:`bnstudy.claims.decide.sequential`)."""
    lv = pd.to_numeric(ledger.get("interval_level", pd.Series(dtype=float)), errors="coerce")
    return float(lv.min()) if lv.notna().any() else 0.95


def level_note(row: pd.Series, base: float) -> str:
    """' (98.3% CI, look 3 of 3)'-style note where a row's interval is not at the study's
    level: the interval of its stopping look."""
    lv = row.get("interval_level")
    if lv is None or pd.isna(lv) or float(lv) <= base + 1e-12:
        return ""
    return f" ({float(lv):.1%} CI: sequential look)"


def _seeds(row: pd.Series) -> str:
    n = row.get("n_seeds")
    return "" if n is None or pd.isna(n) else str(int(n))


def _adjusted(row: pd.Series) -> str:
    a = row.get("adjusted_verdict")
    return O.outcome(a if isinstance(a, str) and a else row["verdict"])


def _count(n) -> str:
    return "inf" if math.isinf(n) else str(int(n))


def _needed(row: pd.Series) -> str:
    """Seeds for 80% power at the row's own level, with its range (90% interval of d_z)."""
    n = row.get("seeds_needed")
    if n is None or pd.isna(n):
        return ""
    lo, hi = row.get("seeds_needed_low"), row.get("seeds_needed_high")
    if lo is None or hi is None or pd.isna(lo) or pd.isna(hi):
        return _count(n)
    return f"{_count(n)} ({_count(lo)}-{_count(hi)})"


def table(ledger: pd.DataFrame, measured_only: bool = False) -> str:
    """One Markdown table row per ledger row, in ledger order; with ``measured_only``, the
    claims the study did not measure are one line under the table instead of rows."""
    unmeasured = ledger["verdict"] == "not measured"
    shown = ledger[~unmeasured] if measured_only else ledger
    base = base_level(ledger)
    columns = [f"effect [{base:.0%} CI]" if c == COLUMNS[2] else c for c in COLUMNS]
    lines = ["| " + " | ".join(columns) + " |", "|" + " --- |" * len(columns)]
    for _, row in shown.iterrows():
        words = row.get("in_words")
        cells = (f"`{row['claim_id']}`", _where(row), _effect(row, base),
                 words if isinstance(words, str) else "", _seeds(row), O.outcome(row["verdict"]),
                 _adjusted(row), _needed(row), str(row.get("deviations", "") or ""))
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    missing = sorted(set(ledger.loc[unmeasured, "claim_id"]) - set(shown["claim_id"]))
    if measured_only and missing:
        lines += ["", "Not measured by this study: " + ", ".join(f"`{c}`" for c in missing) + "."]
    return "\n".join(lines) + "\n"


def read(results_dir: str | Path) -> pd.DataFrame:
    """A study's ledger through the one checked reader (a flipped byte is refused, naming the
    file)."""
    from bnstudy import io

    path = Path(results_dir) / "tables" / "claims.parquet"
    if not path.is_file():
        raise FileNotFoundError(f"no claims ledger at {path}: run that study first "
                                f"(snakemake --cores 2 --configfile config/studies/<name>.yaml)")
    return io.read_table(path)


def rewrite(text: str, root: str | Path = ".") -> str:
    """``text`` with every ledger block regenerated from the ledger its opening line names."""
    def block(m: re.Match) -> str:
        ledger = read(Path(root) / m.group("dir").strip())
        return m.group(1) + table(ledger, measured_only=True) + m.group(4)

    return BLOCK.sub(block, text)


def rewrite_file(path: str | Path) -> int:
    """Regenerate the ledger blocks of a Markdown file in place; returns how many there are."""
    path = Path(path)
    text = path.read_text()
    path.write_text(rewrite(text, path.parent))
    return len(BLOCK.findall(text))
