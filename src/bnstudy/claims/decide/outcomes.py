"""The ledger's outcome words, defined once: every surface (the Parquet ledger's ``verdict`` and
``adjusted_verdict`` columns, the Markdown ledgers, ``compare``, the reports and the README's
counts) writes exactly these strings, and reads older ledgers through :func:`outcome`.

- **supported**: the row's interval lies wholly on the paper's side of the rule's boundary;
- **contradicted at this setting**: it lies wholly on the other side: a confident effect
  against the claim, at this study's data, model, steps and seeds;
- **absent at this setting**: (a directional claim with a margin) the interval straddles 0 but
  excludes every effect at least the margin's size in the paper's direction (Lakens' one-sided
  equivalence test): whatever effect there is, it is smaller than the smallest effect of
  interest the claim declared;
- **undecided**: none of these: more seeds could decide;
- **not measured**: the study did not run what the claim needs (and **mixed**, for a claim
  whose rows disagree, in the reports' per-claim counts).
"""

from __future__ import annotations

SUPPORTED = "supported"
CONTRADICTED = "contradicted at this setting"
ABSENT = "absent at this setting"
UNDECIDED = "undecided"
NOT_MEASURED = "not measured"
MIXED = "mixed"

# the four outcomes of a measured row, in the order every surface lists them
OUTCOMES = (SUPPORTED, CONTRADICTED, ABSENT, UNDECIDED)
DECIDED = (SUPPORTED, CONTRADICTED, ABSENT)
ALL = (*OUTCOMES, NOT_MEASURED, MIXED)

MEANING = {
    SUPPORTED: "the interval lies wholly on the claim's side of the rule's boundary",
    CONTRADICTED: "the interval lies wholly on the other side: a confident effect against the "
                  "claim, at this study's data, model, steps and seeds",
    ABSENT: "the interval straddles 0 but excludes every effect at least the claim's margin in "
            "the paper's direction: any effect is smaller than the smallest one of interest",
    UNDECIDED: "the interval straddles the boundary: more seeds could decide either way",
    NOT_MEASURED: "the study did not run what the claim needs",
    MIXED: "the claim's rows (experiments or normalizers) disagree: some rows decide one way, "
           "others another way or not at all",
}

# the words of ledgers written before issue 46 (shipped paper studies until they are rerun)
LEGACY = {"not supported": CONTRADICTED, "inconclusive": UNDECIDED}


def outcome(verdict: str) -> str:
    """``verdict`` in the outcome words (an older ledger's words translated); a one-line error
    for anything else."""
    v = LEGACY.get(verdict, verdict)
    if v not in ALL:
        raise ValueError(f"unknown verdict {verdict!r}; valid choices: {list(ALL)}")
    return v
