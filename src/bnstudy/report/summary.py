"""What the study found: the report's summary and full ledger rows, from the claims ledger.

Each ledger row (see :mod:`bnstudy.claims.ledger`) becomes a dict of display strings; measured rows
are
listed one by one in the summary, each linked to the report section that holds its evidence
(the section drawn from the claim's table, at the experiment's figures where it has any), and
the rows the study did not measure are gathered in one "not measured" line.
"""

from __future__ import annotations

import pandas as pd

from bnstudy.claims import ledger as claims
from bnstudy.claims import markdown as ledger_markdown

# Cohen's d_z (mean / sd of the paired differences) is shown from this many seeds on: below
# it the sd is too uncertain for the ratio to mean anything (values like -7.9e+03 at n = 3)
MIN_SEEDS_DZ = 5
# claims evaluated outside claims.CLAIMS, by the table they read
EXTRA_TABLES = {"dannemann": "dannemann"}


def claim_tables() -> dict[str, str]:
    """claim id -> the aggregated table its verdict is computed from."""
    return {**{c.key: c.table for c in claims.CLAIMS}, **EXTRA_TABLES}


def _num(x, fmt: str) -> str | None:
    return None if x is None or pd.isna(x) else format(float(x), fmt)


def _text(x) -> str:
    return "" if x is None or (not isinstance(x, str) and pd.isna(x)) else str(x)


def where(r: pd.Series) -> str:
    """'experiment: norm vs baseline' (the parts the row has)."""
    exp, norm, base = _text(r.get("experiment")), _text(r.get("norm")), _text(r.get("baseline"))
    side = norm + (f" vs {base}" if base and norm else "")
    return ": ".join(p for p in (exp, side) if p) or base


def effect(r: pd.Series) -> str:
    """'effect [low, high]', or the row's note where it has no effect (e.g. Dannemann)."""
    e = _num(r.get("effect"), ".3g")
    if e is None:
        return _text(r.get("note")) or "n/a"
    lo, hi = _num(r.get("ci_low"), ".3g"), _num(r.get("ci_high"), ".3g")
    return f"{e} [{lo}, {hi}]" if lo is not None and hi is not None else e


def effect_full(r: pd.Series) -> str:
    e = _num(r.get("effect"), ".3g")
    if e is None:
        return ""
    out = e
    if _num(r.get("ci_low"), ".3g") is not None:
        out += f" [{r['ci_low']:.3g}, {r['ci_high']:.3g}]"
        n = r.get("n_seeds")
        dz = _num(r.get("cohens_dz"), ".2g")
        if dz is not None and n is not None and pd.notna(n) and n >= MIN_SEEDS_DZ:
            out += f", d_z={dz}"
    n = r.get("n_seeds")
    return out + (f" (n={int(n)})" if n is not None and pd.notna(n) else "")


def seeds(x) -> str:
    """``seeds_needed`` as text: an integer, 'inf' (the effect sits on the boundary), or ''."""
    if x is None or pd.isna(x):
        return ""
    return "inf" if x == float("inf") else str(int(x))


def values(r: pd.Series) -> str:
    v = _num(r.get("value"), ".4g")
    if v is None:
        return ""
    b, base = _num(r.get("baseline_value"), ".4g"), r.get("baseline")
    return v + (f" vs {b} ({base})" if b is not None and isinstance(base, str) else "")


def anchor(r: pd.Series, section_of: dict[str, tuple[str, str]],
           groups: set[str]) -> dict:
    """The evidence of a row: the section drawn from the claim's table (``section_anchor``,
    ``section``) and, where that section has figures of the row's experiment, their group
    (``anchor``; else the section's); anchors are None, and ``section`` says why, when the
    report has no such section."""
    table = claim_tables().get(r["claim_id"])
    if table not in section_of:
        why = f"no section for table {table!r}" if table else "unknown claim"
        return {"anchor": None, "section_anchor": None, "section": why}
    sec_id, title = section_of[table]
    sub = f"{sec_id}--{_text(r.get('experiment'))}"
    return {"anchor": sub if sub in groups else sec_id, "section_anchor": sec_id,
            "section": title}


def rows(ledger: pd.DataFrame, section_of: dict[str, tuple[str, str]],
         groups: set[str]) -> list[dict]:
    """One display dict per ledger row, in ledger order (a row read at a sequential look says
    its interval's level)."""
    out, base = [], ledger_markdown.base_level(ledger)
    for _, r in ledger.iterrows():
        role = r.get("role")
        out.append({
            "claim_id": r["claim_id"], "paper": _text(r.get("paper")), "claim": r["claim"],
            "quantity": _text(r.get("quantity")), "curve": _text(r.get("curve")),
            "check": role if isinstance(role, str) and role != "test" else "",
            "rule": _text(r.get("rule")), "note": _text(r.get("note")),
            "verdict": r["verdict"], "where": where(r),
            "effect": effect(r) + ledger_markdown.level_note(r, base),
            "adjusted": _text(r.get("adjusted_verdict")) or r["verdict"],
            "seeds_needed": seeds(r.get("seeds_needed")),
            "detectable": _num(r.get("detectable_effect"), ".3g") or "",
            "has_effect": _num(r.get("effect"), "g") is not None,
            "effect_full": effect_full(r) + ledger_markdown.level_note(r, base),
            "means": values(r), **anchor(r, section_of, groups),
            "in_words": _text(r.get("in_words")), "verdict_means": _text(r.get("verdict_means")),
            "measured": r["verdict"] != "not measured",
        })
    return out


def found(display_rows: list[dict]) -> dict:
    """The summary: verdict counts by row and by claim (a claim whose rows disagree is
    'mixed'), implementation checks counted apart (the multiplicity-adjusted verdicts:
    :mod:`bnstudy.claims.multiplicity`), the measured rows (also grouped by claim, consecutive
    rows of one claim id together), and the unmeasured ones for one line."""
    measured = [r for r in display_rows if r["measured"]]
    tests = [r for r in display_rows if r["check"] != "implementation check"]
    checks = [r for r in measured if r["check"] == "implementation check"]
    order = ("supported", "not supported", "inconclusive", "not measured")

    def ranked(verdicts) -> list[tuple[str, int]]:
        counts: dict[str, int] = {}
        for v in verdicts:
            counts[v] = counts.get(v, 0) + 1
        return sorted(counts.items(), key=lambda kv: (order.index(kv[0]) if kv[0] in order
                                                       else len(order), kv[0]))

    by_claim: dict[str, set[str]] = {}
    for r in tests:
        by_claim.setdefault(r["claim_id"], set()).add(r["adjusted"])
    claim_verdicts = [next(iter(v)) if len(v) == 1 else "mixed" for v in by_claim.values()]
    groups: list[dict] = []
    for r in measured:  # one group per claim: the claim and its section once, then its rows
        if not groups or groups[-1]["claim_id"] != r["claim_id"]:
            groups.append({"claim_id": r["claim_id"], "claim": r["claim"], "rows": [],
                           "section": r["section"], "section_anchor": r["section_anchor"]})
        groups[-1]["rows"].append(r)
    return {"rows": measured, "groups": groups, "counts": ranked(r["adjusted"] for r in tests),
            "claim_counts": ranked(claim_verdicts), "n_claims": len(by_claim),
            "check_counts": ranked(r["adjusted"] for r in checks),
            "unmeasured": [r for r in display_rows if not r["measured"]]}


def headlines(display_rows: list[dict]) -> dict[str, str]:
    """``{section anchor: one line}``: the adjusted verdicts of the claims whose evidence is that
    section (implementation checks apart), the line a collapsed section shows, e.g. ``ics_grad:
    supported on star, dln; not supported on digits``."""
    by_section: dict[str, dict[str, dict[str, list[str]]]] = {}
    for r in display_rows:
        if not r["measured"] or not r["section_anchor"] or r["check"] == "implementation check":
            continue
        claims = by_section.setdefault(r["section_anchor"], {})
        verdicts = claims.setdefault(r["claim_id"], {})
        verdicts.setdefault(r["adjusted"], []).append(r["where"].split(":")[0])
    out = {}
    for sec, claims in by_section.items():
        out[sec] = "; ".join(
            f"{cid}: " + ", ".join(f"{v} on {', '.join(dict.fromkeys(w))}"
                                   for v, w in verdicts.items())
            for cid, verdicts in claims.items())
    return out
