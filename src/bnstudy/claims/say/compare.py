"""Two ledgers side by side: the rows whose verdicts or effects differ.

``python -m bnstudy compare A B`` reads ``A/tables/claims.parquet`` and ``B/tables/claims.parquet``
(two results directories: the same study before and after a code change, on the CPU and on a
GPU, at two seed counts) and prints every ledger row that is in one and not the other, or whose
verdict, adjusted verdict or effect differs (effects within ``tol`` of each other, relative to
the larger magnitude, count as equal; ``tol=0`` asks for identical numbers). The exit status is
0 when nothing differs and 1 otherwise, like ``diff``.

Each differing row also says **why** it moved (:func:`why`), from what else differs between its
two sides: ``the quantity`` (what the row measures, its ``quantity`` text), ``the rule`` (its
test direction, margin, role or interval level), ``the seeds`` (how many seeds it pooled),
``Holm's family`` (only its adjusted verdict moved, its own effect, interval and p-value equal:
the other rows of the study's Holm family changed) and, when none of these changed, ``the
data`` (the same question asked of numbers that moved: a retrained run, a kernel that rounds
differently). A row only in one ledger was added or removed by the claims' declarations (``the
declaration``).
"""

from __future__ import annotations

import math

import pandas as pd

from bnstudy.claims.decide import outcomes as O


def _words(ledger: pd.DataFrame) -> pd.DataFrame:
    """``ledger`` with its verdicts in the outcome words (an older ledger's translated), so that
    a ledger compared with its rerun under the new words differs only where an outcome does."""
    out = ledger.copy()
    for col in ("verdict", "adjusted_verdict"):
        if col in out:
            out[col] = [O.outcome(v) if isinstance(v, str) else v for v in out[col]]
    return out

KEY = ("claim_id", "experiment", "dataset", "model", "norm", "baseline")
VERDICTS = ("verdict", "adjusted_verdict")
# what else can differ between a row's two sides, by the reason it gives (:func:`why`)
REASONS = (("the quantity", ("quantity",)),
           ("the rule", ("rule", "margin", "role", "interval_level")),
           ("the seeds", ("n_seeds",)))
OWN = ("verdict", "effect", "ci_low", "ci_high", "p_value")  # a row's own statistics
HOLM = "Holm's family"


def _keyed(ledger: pd.DataFrame) -> pd.DataFrame:
    d = ledger.copy()
    for k in KEY:
        d[k] = d[k].fillna("").astype(str) if k in d else ""
    return d.drop_duplicates(list(KEY)).set_index(list(KEY))


def _same_effect(a, b, tol: float) -> bool:
    a, b = (float("nan") if x is None or pd.isna(x) else float(x) for x in (a, b))
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return abs(a - b) <= tol * max(abs(a), abs(b))


def _differs(x, y) -> bool:
    """Numbers (missing ones as NaN) compared as effects are; anything else as text."""
    try:
        return not _same_effect(x, y, 1e-9)
    except (TypeError, ValueError):
        return str(x) != str(y)


def why(ra, rb) -> str:
    """Why a row's two sides differ: the reasons of :data:`REASONS` whose columns differ (a
    column only one ledger has is not compared), else ``Holm's family`` when the row's own
    statistics (:data:`OWN`) are equal and only its adjusted verdict moved, else ``the data``;
    ``the declaration`` for a row in one ledger only."""
    if ra is None or rb is None:
        return "the declaration"

    def moved(cols) -> bool:
        return any(_differs(ra.get(c), rb.get(c)) for c in cols
                   if c in ra.index and c in rb.index)

    found = [reason for reason, cols in REASONS if moved(cols)]
    if not found and "p_value" in ra.index and "p_value" in rb.index and not moved(OWN):
        return HOLM
    return ", ".join(found) or "the data"


def compare(a: pd.DataFrame, b: pd.DataFrame, tol: float = 1e-9) -> pd.DataFrame:
    """One row per ledger row that differs: its key, ``what`` differs, and both sides'
    verdicts and effects (``_a``, ``_b``). ``tol``: a finite relative difference >= 0."""
    if isinstance(tol, bool) or not isinstance(tol, int | float) or not 0 <= tol < math.inf:
        raise ValueError(f"tol must be a finite number >= 0 (a relative difference of "
                         f"effects), got {tol!r}")
    ka, kb = _keyed(_words(a)), _keyed(_words(b))
    rows = []
    for key in sorted(set(ka.index) | set(kb.index)):
        ra = ka.loc[key] if key in ka.index else None
        rb = kb.loc[key] if key in kb.index else None
        what = []
        if ra is None or rb is None:
            what.append("only in A" if rb is None else "only in B")
        else:
            what += [v.replace("_", " ") for v in VERDICTS
                     if v in ka.columns and v in kb.columns and ra[v] != rb[v]]
            if not _same_effect(ra.get("effect"), rb.get("effect"), tol):
                what.append("effect")
        if what:
            row = dict(zip(KEY, key, strict=True))
            row["what"] = ", ".join(what)
            row["why"] = why(ra, rb)
            for side, r in (("a", ra), ("b", rb)):
                for col in ("verdict", "adjusted_verdict", "effect", "ci_low", "ci_high",
                            "n_seeds"):
                    row[f"{col}_{side}"] = None if r is None else r.get(col)
            rows.append(row)
    return pd.DataFrame(rows, columns=[*KEY, "what", "why", *(f"{c}_{s}" for s in "ab" for c in (
        "verdict", "adjusted_verdict", "effect", "ci_low", "ci_high", "n_seeds"))])


def _fmt(x) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return f"{x:+.3g}" if isinstance(x, float) else str(x)


def where(r) -> str:
    """A ledger row's key as a reader names it: ``e: batchnorm vs none``; a row over no
    experiment (a claim a study did not measure, a study-wide row) says so rather than
    printing an empty key (``[ vs none]``)."""
    run = ": ".join(x for x in (r["experiment"], r["norm"]) if x)
    run = run or "/".join(x for x in (r["dataset"], r["model"]) if x) or "no experiment"
    return run + (f" vs {r['baseline']}" if r["baseline"] else "")


def text(diff: pd.DataFrame, a: str, b: str) -> str:
    """The differences as lines a reader can scan."""
    if diff.empty:
        return f"no differences between {a} and {b}"
    lines = [f"{len(diff)} ledger row(s) differ between A = {a} and B = {b}:"]
    for _, r in diff.iterrows():
        lines.append(f"- {r['claim_id']} [{where(r)}] ({r['what']}; why: {r['why']}): "
                     f"A {_fmt(r['verdict_a'])} {_fmt(r['effect_a'])} "
                     f"[{_fmt(r['ci_low_a'])}, {_fmt(r['ci_high_a'])}], "
                     f"B {_fmt(r['verdict_b'])} {_fmt(r['effect_b'])} "
                     f"[{_fmt(r['ci_low_b'])}, {_fmt(r['ci_high_b'])}]")
    return "\n".join(lines)


def verdict_changes(diff: pd.DataFrame) -> pd.DataFrame:
    """The rows of a :func:`compare` result whose verdict or adjusted verdict changed (a row in
    one ledger only counts)."""
    keep = diff["what"].str.contains("verdict|only in", regex=True)
    return diff[keep].reset_index(drop=True)


def markdown(diff: pd.DataFrame) -> str:
    """Changed verdicts as Markdown bullets: the row, old -> new verdict (adjusted, after Holm,
    where it differs), the new effect and interval, and why it moved."""
    if diff.empty:
        return "- no verdict changed"
    lines = []
    for _, r in diff.iterrows():
        holm = (f" (after Holm: {_fmt(r['adjusted_verdict_a'])} -> "
                f"{_fmt(r['adjusted_verdict_b'])})")
        lines.append(f"- `{r['claim_id']}` [{where(r)}]: {_fmt(r['verdict_a'])} -> "
                     f"{_fmt(r['verdict_b'])}{holm}, effect {_fmt(r['effect_b'])} "
                     f"[{_fmt(r['ci_low_b'])}, {_fmt(r['ci_high_b'])}] at "
                     f"{_fmt(r['n_seeds_b'])} seeds ({r['what']}; why: {r['why']})")
    return "\n".join(lines)
