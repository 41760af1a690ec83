"""The answer first: one generated sentence per claim, and the deviations grouped by paper.

A reader opening a report (or the README) should see what the study found about each claim
before any method or deviation: :func:`sentences` writes, from the claims ledger alone, one
sentence per claim that the study tested (its paper tests: :func:`bnstudy.report.summary.kind`)
saying what was found and where it goes which way, its rows grouped by their multiplicity-
adjusted verdict, each with its effect on the claim's scale, e.g. "BN does not reduce
(gradient) internal covariate shift: supported at this setting on dln and star (1.56x and 4.2x
the plain net's); contradicted at this setting on digits (0.16x)". Verdict words are
:func:`bnstudy.claims.say.words.verdict_word`'s; effects are the ledger's (``exp(effect)`` for a
claim on a log scale).

:func:`by_paper` groups the ledger's deviations under the paper whose protocol they compare
against (a row's ``paper``), each difference once, with the experiments it applies to, so a line
never mixes two papers' protocols.
"""

from __future__ import annotations

import math

import pandas as pd

from bnstudy.claims import ledger as claims
from bnstudy.claims.say import words
from bnstudy.report import summary

UNDECIDED = ("inconclusive", "undecided")  # the undecided rows' verdict, old and new words


def _text(x) -> str:
    return "" if x is None or (not isinstance(x, str) and pd.isna(x)) else str(x)


def _word(verdict: str) -> str:
    try:
        return words.verdict_word(verdict)
    except ValueError:  # a verdict this module's words do not know: shown as stored
        return verdict


def _scale(claim_id: str) -> str:
    return next((c.scale for c in claims.CLAIMS if c.key == claim_id), "diff")


def _short(effect, scale: str) -> str:
    """The effect on the claim's scale, short: '4.2x', '+3.1 points', '-12%', '+0.031'."""
    if effect is None or pd.isna(effect) or not math.isfinite(float(effect)):
        return ""
    e = float(effect)
    if scale == "log":
        r = math.exp(min(e, 700.0))
        return f"{r:.2g}x" if r < 10 else f"{r:.0f}x" if r < 1e6 else f"{r:.1e}x"
    if scale == "points":
        return f"{e:+.2g} points"
    if scale == "relative":
        return f"{100 * e:+.3g}%"
    return f"{e:+.3g}"


def _join(items: list[str], unique: bool = True) -> str:
    """'a', 'a and b', 'a, b and c' (each item once unless ``unique`` is false: effects and
    places listed in one order)."""
    items = [i for i in items if i]
    if unique:
        items = list(dict.fromkeys(items))
    if len(items) <= 2:
        return " and ".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


def _base(baseline: str, scale: str) -> str:
    if not baseline or scale != "log":
        return ""
    return " the plain net's" if baseline == "none" else f" {baseline}'s"


def _where(rows: pd.DataFrame, usual: str) -> list[str]:
    """Each row's place: its experiment, with its normalizer where it is not the claim's usual
    one (a claim read on several normalizers, or a user's normalizer: ``claims_as``)."""
    out = []
    for _, r in rows.iterrows():
        exp, norm = _text(r.get("experiment")) or "the study", _text(r.get("norm"))
        out.append(f"{exp} ({norm})" if norm and norm != usual else exp)
    return out


def sentence(claim: str, rows: pd.DataFrame, scale: str) -> str:
    """One claim's sentence from its measured paper-test rows."""
    adjusted = rows.get("adjusted_verdict", rows["verdict"]).fillna(rows["verdict"])
    usual = rows["norm"].dropna().astype(str).mode()
    usual = usual.iloc[0] if len(usual) else ""
    baselines = rows["baseline"].dropna().astype(str).unique() if "baseline" in rows else []
    parts = []
    order = sorted(dict.fromkeys(adjusted), key=lambda v: (v in UNDECIDED, list(adjusted).index(v)))
    base = _base(baselines[0], scale) if len(baselines) == 1 else ""
    for v in order:
        sub = rows[adjusted == v]
        shown = [e for e in (_short(e, scale) for e in sub["effect"]) if e]
        tail = f" ({_join(shown, unique=False)}{base})" if shown else ""
        parts.append(f"{_word(v)} on {_join(_where(sub, usual), unique=False)}{tail}")
    claim = claim.rstrip(".")
    return f"{claim[:1].upper()}{claim[1:]}: {'; '.join(parts)}."


def sentences(ledger: pd.DataFrame | None) -> list[dict]:
    """``[{"claim_id", "paper", "text", "decided"}]``: one sentence per claim with measured
    paper tests, in ledger order (``decided``: a row of it is decided)."""
    if ledger is None or ledger.empty:
        return []
    measured = ledger[ledger["verdict"] != "not measured"]
    tests = measured[measured.apply(summary.kind, axis=1) == summary.PAPER_TEST]
    out = []
    shared = tests.groupby("claim")["claim_id"].nunique()
    for cid in dict.fromkeys(tests["claim_id"]):
        rows = tests[tests["claim_id"] == cid]
        claim = _short_claim(str(rows["claim"].iloc[0]))
        base = rows["baseline"].dropna().astype(str).unique() if "baseline" in rows else []
        if shared.get(rows["claim"].iloc[0], 1) > 1 and len(base) == 1:
            claim += f" (against {base[0]})"  # one claim tested against several baselines
        adjusted = rows.get("adjusted_verdict", rows["verdict"]).fillna(rows["verdict"])
        out.append({"claim_id": cid, "paper": _text(rows["paper"].iloc[0]),
                    "text": sentence(claim, rows, _scale(cid)),
                    "decided": bool((~adjusted.isin(UNDECIDED)).any())})
    return out


def _short_claim(claim: str, most: int = 140) -> str:
    """The claim up to its first explanation (': ' or '; ') when it is longer than ``most``."""
    if len(claim) <= most:
        return claim
    for i in range(len(claim)):  # the first ': ' or '; ' outside parentheses
        if claim[i:i + 2] in (": ", "; ") and claim[:i].count("(") == claim[:i].count(")"):
            return claim[:i]
    return claim


def others(ledger: pd.DataFrame | None) -> str:
    """One line on the measured rows that are not paper tests and the claims not measured."""
    if ledger is None or ledger.empty:
        return ""
    measured = ledger[ledger["verdict"] != "not measured"]
    kinds = measured.apply(summary.kind, axis=1)
    parts = []
    for k in summary.KINDS:
        if k == summary.PAPER_TEST or not (kinds == k).any():
            continue
        sub = measured[kinds == k]
        adj = sub.get("adjusted_verdict", sub["verdict"]).fillna(sub["verdict"])
        counts = ", ".join(f"{n} {_word(v)}" for v, n in adj.value_counts().items())
        parts.append(f"{len(sub)} {k} row{'s' if len(sub) != 1 else ''} ({counts})")
    tested = set(measured["claim_id"])
    missing = sorted(set(ledger["claim_id"]) - tested)
    text = ("Not tests of a paper's claim, counted apart: " + "; ".join(parts) + "."
            if parts else "")
    if missing:
        text += f" Not measured here: {', '.join(missing)}."
    return text.strip()


def by_paper(ledger: pd.DataFrame | None) -> list[dict]:
    """``[{"paper", "protocols": [{"protocol", "lines": [(difference, [experiments])],
    "same": [experiments]}]}]``: the deviations of the measured rows grouped under the paper
    and the protocol of that paper they compare against, each difference once with the
    experiments it applies to (``same``: the experiments that run that protocol's setting),
    in ledger order."""
    if ledger is None or "deviations" not in ledger or "paper" not in ledger:
        return []
    measured = ledger[ledger["verdict"] != "not measured"]
    papers: dict[str, dict[str, dict]] = {}
    for _, r in measured.iterrows():
        paper = _text(r.get("paper"))
        if not paper:
            continue
        proto = _text(r.get("protocol")) or "its protocol"
        entry = papers.setdefault(paper, {}).setdefault(proto, {"lines": {}, "same": []})
        exp = _text(r.get("experiment")) or "the whole study"
        for part in _text(r.get("deviations")).split(";"):
            part = part.strip()
            if part.startswith("none:"):  # the ledger's 'none: the paper's setting'
                if exp not in entry["same"]:
                    entry["same"].append(exp)
            elif part and exp not in entry["lines"].setdefault(part, []):
                entry["lines"][part].append(exp)
    return [{"paper": paper, "protocols": [
                {"protocol": proto, "lines": list(e["lines"].items()), "same": e["same"]}
                for proto, e in protos.items() if e["lines"] or e["same"]]}
            for paper, protos in papers.items()
            if any(e["lines"] or e["same"] for e in protos.values())]
