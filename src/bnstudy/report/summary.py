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
from bnstudy.claims.decide import outcomes as O
from bnstudy.claims.say import words

# Cohen's d_z (mean / sd of the paired differences) is shown from this many seeds on: below
# it the sd is too uncertain for the ratio to mean anything (values like -7.9e+03 at n = 3)
MIN_SEEDS_DZ = 5
# claims evaluated outside claims.CLAIMS, by the table they read
EXTRA_TABLES = {"dannemann": "dannemann"}
# rows computed exactly (no sampling, no interval): they cannot be undecided
EXACT_CLAIMS = ("dannemann",)
# The kinds of measured rows; only paper tests count in the headline, the others apart
PAPER_TEST = "paper test"
KINDS = {
    PAPER_TEST: "statistical tests of a paper's claim: the headline counts only these",
    "exact computation": "a paper's claim computed exactly (no seeds, no interval)",
    "implementation check": "holds by construction: checks the measurement, not the paper",
    "by construction": "Proposition 2 at deeper layers, whose inputs are not i.i.d.: holds or "
                       "fails by the network's construction, beyond what the paper claims",
    "beyond the paper": "asks more than the paper claims (e.g. a ResNet the paper sets aside)",
    "one-seed illustration": "a figure's runs at one seed: no interval, not a test",
}


def kind(r: pd.Series) -> str:
    """The row's kind (a key of :data:`KINDS`), from its ``role`` and claim id."""
    role, cid = _text(r.get("role")) or "test", str(r["claim_id"])
    if role == "implementation check":
        return role
    if cid.startswith("prop2_deep"):
        return "by construction"
    if role in ("beyond the paper", "one-seed illustration"):
        return role
    return "exact computation" if cid in EXACT_CLAIMS else PAPER_TEST


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


def level(r: pd.Series) -> str:
    """' (95% CI)': the level of the row's own interval (``interval_level``; a sequential look's
    is higher), '' for a row without an interval."""
    lv = r.get("interval_level")
    if _num(r.get("ci_low"), "g") is None or lv is None or pd.isna(lv):
        return ""
    return f" ({100 * float(lv):.3g}% CI)"


def effect(r: pd.Series) -> str:
    """'effect [low, high] (level% CI)', or the row's note where it has no effect (e.g.
    Dannemann)."""
    e = _num(r.get("effect"), ".3g")
    if e is None:
        return _text(r.get("note")) or "n/a"
    lo, hi = _num(r.get("ci_low"), ".3g"), _num(r.get("ci_high"), ".3g")
    return f"{e} [{lo}, {hi}]{level(r)}" if lo is not None and hi is not None else e


def effect_full(r: pd.Series) -> str:
    e = _num(r.get("effect"), ".3g")
    if e is None:
        return ""
    out = e
    if _num(r.get("ci_low"), ".3g") is not None:
        out += f" [{r['ci_low']:.3g}, {r['ci_high']:.3g}]{level(r)}"
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
    """One display dict per ledger row, in ledger order (each interval says its own level;
    ``verdict_word``/``adjusted_word``: the verdicts in
    :func:`bnstudy.claims.say.words.verdict_word`'s words; ``deviations``/``protocol``: the
    ledger's, '' where it has none)."""
    out = []
    for _, r in ledger.iterrows():
        role = r.get("role")
        adjusted = words.verdict_word(_text(r.get("adjusted_verdict")) or r["verdict"])
        out.append({
            "claim_id": r["claim_id"], "paper": _text(r.get("paper")), "claim": r["claim"],
            "quantity": _text(r.get("quantity")), "curve": _text(r.get("curve")),
            "check": role if isinstance(role, str) and role != "test" else "",
            "kind": kind(r), "deviations": _text(r.get("deviations")),
            "experiment": _text(r.get("experiment")), "setting": "",
            "protocol": _text(r.get("protocol")),
            "rule": _text(r.get("rule")), "note": _text(r.get("note")),
            "verdict": words.verdict_word(r["verdict"]), "where": where(r),
            "verdict_word": words.verdict_word(r["verdict"]),
            "adjusted_word": words.verdict_word(adjusted),
            "effect": effect(r),
            "adjusted": adjusted,
            "seeds_needed": seeds(r.get("seeds_needed")),
            "detectable": _num(r.get("detectable_effect"), ".3g") or "",
            "has_effect": _num(r.get("effect"), "g") is not None,
            "effect_full": effect_full(r),
            "means": values(r), **anchor(r, section_of, groups),
            "in_words": _text(r.get("in_words")), "verdict_means": _text(r.get("verdict_means")),
            "measured": r["verdict"] != "not measured",
        })
    return out


def _ranked(verdicts) -> list[tuple[str, int, str]]:
    """``[(verdict, count, words)]`` in the order of :data:`bnstudy.claims.decide.outcomes.ALL`."""
    order = O.ALL
    counts: dict[str, int] = {}
    for v in verdicts:
        counts[v] = counts.get(v, 0) + 1
    return [(v, n, words.verdict_word(v)) for v, n in sorted(
        counts.items(), key=lambda kv: (order.index(kv[0]) if kv[0] in order else len(order),
                                        kv[0]))]


def found(display_rows: list[dict]) -> dict:
    """The summary: verdict counts of the paper tests by row and by claim (a claim whose rows
    disagree is 'mixed'), the other kinds of measured rows counted apart (``apart``: kind,
    what it means, counts), the measured rows (also grouped by claim, consecutive rows of one
    claim id together), and the unmeasured ones for one line. Verdicts are the
    multiplicity-adjusted ones (:mod:`bnstudy.claims.decide.multiplicity`)."""
    measured = [r for r in display_rows if r["measured"]]
    tests = [r for r in measured if r["kind"] == PAPER_TEST]
    by_claim: dict[str, set[str]] = {}
    for r in tests:
        by_claim.setdefault(r["claim_id"], set()).add(r["adjusted"])
    claim_verdicts = [next(iter(v)) if len(v) == 1 else "mixed" for v in by_claim.values()]
    apart = [{"kind": k, "means": KINDS[k],
              "counts": _ranked(r["adjusted"] for r in measured if r["kind"] == k)}
             for k in KINDS if k != PAPER_TEST and any(r["kind"] == k for r in measured)]
    groups: list[dict] = []
    for r in measured:  # one group per claim: the claim and its section once, then its rows
        if not groups or groups[-1]["claim_id"] != r["claim_id"]:
            groups.append({"claim_id": r["claim_id"], "claim": r["claim"], "rows": [],
                           "section": r["section"], "section_anchor": r["section_anchor"]})
        groups[-1]["rows"].append(r)
    decided = sum(r["adjusted"] in O.DECIDED for r in tests)
    return {"rows": measured, "groups": groups, "counts": _ranked(r["adjusted"] for r in tests),
            "n_tests": len(tests), "n_decided": decided,
            "claim_counts": _ranked(claim_verdicts), "n_claims": len(by_claim),
            "apart": apart, "meanings": [(words.verdict_word(v), m)
                                         for v, m in words.VERDICT_MEANING.items()],
            "unmeasured": [r for r in display_rows if not r["measured"]]}


def headlines(display_rows: list[dict]) -> dict[str, str]:
    """``{section anchor: one line}``: the adjusted verdicts of the claims whose evidence is that
    section (paper tests only), the line a collapsed section shows, e.g. ``ics_grad: supported at
    this setting on star, dln; contradicted at this setting on digits``."""
    by_section: dict[str, dict[str, dict[str, list[str]]]] = {}
    for r in display_rows:
        if not r["measured"] or not r["section_anchor"] or r["kind"] != PAPER_TEST:
            continue
        claims = by_section.setdefault(r["section_anchor"], {})
        verdicts = claims.setdefault(r["claim_id"], {})
        verdicts.setdefault(r["adjusted_word"], []).append(r["where"].split(":")[0])
    out = {}
    for sec, claims in by_section.items():
        out[sec] = "; ".join(
            f"{cid}: " + ", ".join(f"{v} on {', '.join(dict.fromkeys(w))}"
                                   for v, w in verdicts.items())
            for cid, verdicts in claims.items())
    return out
