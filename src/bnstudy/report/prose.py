"""The report's opening paragraph: what the study found, in sentences, from the claims ledger.

Built from the display rows of :mod:`bnstudy.report.summary` (the multiplicity-adjusted
verdicts), so it says nothing the ledger does not: how many paper tests were measured and
decided, each decided row in words (the ledger's ``in_words``, with its claim and where), and
for the undecided rows the seeds their observed effects and spreads would need
(``seeds_needed``). Verdicts read as :func:`bnstudy.claims.say.words.verdict_word` says ('not
supported' is 'contradicted at this setting': a confident opposite effect). The rows that are
not paper tests (implementation checks, by-construction and beyond-the-paper rows, exact
computations: :data:`bnstudy.report.summary.KINDS`) are counted in a sentence of their own.
"""

from __future__ import annotations

import statistics

from bnstudy.claims.decide import outcomes as O
from bnstudy.claims.say import words

SHOWN = 6  # decided rows spelled out per verdict; the rest are counted


def _row(r: dict) -> str:
    words = r["in_words"] or r["effect"]
    return f"{words} ({r['claim_id']}, {r['where']})"


def _listing(rows: list[dict]) -> str:
    out = "; ".join(_row(r) for r in rows[:SHOWN])
    more = len(rows) - SHOWN
    return out + (f"; and {more} more row{'s' if more > 1 else ''}" if more > 0 else "")


def _counts(rows: list[dict]) -> str:
    """'3 undecided, 1 contradicted at this setting': the rows' adjusted verdicts in words."""
    counts: dict[str, int] = {}
    for r in rows:
        counts[r["adjusted_word"]] = counts.get(r["adjusted_word"], 0) + 1
    return ", ".join(f"{n} {w}" for w, n in counts.items())


def paragraphs(display_rows: list[dict]) -> list[str]:
    """Sentences grouped in paragraphs: counts, supported rows, contradicted rows, undecided
    rows and the seeds they would need, the other kinds of rows. Empty without measured
    rows."""
    measured = [r for r in display_rows if r["measured"]]
    tests = [r for r in measured if r["kind"] == "paper test"]
    others = [r for r in measured if r["kind"] != "paper test"]
    if not measured:
        return []
    by = {v: [r for r in tests if r["adjusted"] == v] for v in O.DECIDED}
    undecided = [r for r in tests if r["adjusted"] not in by]
    claims = {r["claim_id"] for r in tests}
    out = [f"This study measured {len(tests)} paper tests ({len(claims)} claims); after Holm's "
           f"adjustment over them, {len(by[O.SUPPORTED])} are {O.SUPPORTED}, "
           f"{len(by[O.CONTRADICTED])} {O.CONTRADICTED}, {len(by[O.ABSENT])} {O.ABSENT} "
           f"and {len(undecided)} {O.UNDECIDED}."]
    for verdict, rows in by.items():
        if rows:
            out.append(f"{words.verdict_word(verdict).capitalize()}: {_listing(rows)}.")
    if undecided:
        need = [float(r["seeds_needed"]) for r in undecided
                if r["seeds_needed"] not in ("", "inf")]
        flat = sum(r["seeds_needed"] == "inf" for r in undecided)
        text = f"Undecided: {', '.join(sorted({r['claim_id'] for r in undecided}))}."
        if need:
            text += (f" At their observed effects and spreads they would need "
                     f"{int(min(need))} to {int(max(need))} seeds (median "
                     f"{int(statistics.median(need))}) to be resolved with 80% power")
            text += (f"; {flat} sit on their rule's boundary." if flat else ".")
        out.append(text)
    if others:
        kinds: dict[str, list[dict]] = {}
        for r in others:
            kinds.setdefault(r["kind"], []).append(r)
        parts = [f"{len(rs)} {k} row{'s' if len(rs) != 1 else ''} ({_counts(rs)})"
                 for k, rs in kinds.items()]
        out.append(f"Counted apart, as they do not test a paper's claim statistically: "
                   f"{'; '.join(parts)}.")
    return out
