"""The README's verdict table, generated from shipped ledgers (``python -m bnstudy ledger
--readme README.md`` rewrites it; ``--check`` fails when it is stale).

A Markdown file holds a block::

    <!-- verdicts: studies/default studies/santurkar -->
    ...generated table...
    <!-- /verdicts -->

then, per study, what it found in a few generated sentences (one per decided claim:
:func:`bnstudy.report.answer.sentences`), with one row per named results folder (relative to the
file): its paper tests counted by their
multiplicity-adjusted verdict, in the report's words
(:func:`bnstudy.claims.say.words.verdict_word`), and the other measured rows (implementation checks,
rows beyond the paper, ...) counted apart, as the report's headline counts them
(:func:`bnstudy.report.summary.kind`).
"""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

from bnstudy.claims.decide import outcomes as O
from bnstudy.claims.say import markdown, words
from bnstudy.report import summary

BLOCK = re.compile(r"(<!-- verdicts: (?P<dirs>[^>]+?) -->\n)(?P<body>.*?)(<!-- /verdicts -->)",
                   re.S)
COLUMNS = O.OUTCOMES
PLURAL = {"implementation check": "implementation checks", "exact computation":
          "exact computations", "one-seed illustration": "one-seed illustrations"}


def counts(ledger: pd.DataFrame) -> dict:
    """The paper tests' adjusted verdicts, the claims they test, and the other measured rows by
    kind."""
    adjusted = ledger.get("adjusted_verdict", ledger["verdict"]).fillna(ledger["verdict"])
    adjusted = adjusted.map(O.outcome)
    kinds = ledger.apply(summary.kind, axis=1)
    measured = ledger["verdict"] != "not measured"
    tests = measured & (kinds == summary.PAPER_TEST)
    other = kinds[measured & ~tests].value_counts()
    return {"tests": int(tests.sum()),
            "claims": int(ledger.loc[tests, "claim_id"].nunique()),
            "verdicts": {v: int((adjusted[tests] == v).sum()) for v in COLUMNS},
            "other": {k: int(n) for k, n in other.items()}}


def table(root: Path, dirs: list[str]) -> str:
    head = ["study", "paper tests (claims)", *(words.verdict_word(v) for v in COLUMNS),
            "other measured rows", "report"]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for d in dirs:
        c = counts(markdown.read(root / d))
        other = ", ".join(f"{n} {PLURAL.get(k, k) if n != 1 else k}"
                          for k, n in sorted(c["other"].items())) or "none"
        name = Path(d).name
        lines.append(f"| `{name}` | {c['tests']} ({c['claims']}) | "
                     + " | ".join(str(c["verdicts"][v]) for v in COLUMNS)
                     + f" | {other} | [report]({d}/report.html) |")
    return "\n".join(lines) + "\n"


FOUND_PER_STUDY = 5  # claims spelled out per study beside the counts; the rest are counted


def found(root: Path, dirs: list[str]) -> str:
    """What each study found, in a few generated sentences beside the counts: the sentences of
    :func:`bnstudy.report.answer.sentences` (one per claim) of the claims with a decided row,
    at most :data:`FOUND_PER_STUDY`, the undecided rest counted."""
    from bnstudy.report import answer

    lines = []
    for d in dirs:
        said = answer.sentences(markdown.read(root / d))
        decided = [s for s in said if s["decided"]]
        shown = decided[:FOUND_PER_STUDY]
        rest = len(said) - len(shown)
        link = f"[report]({d}/report.html)"
        more = (f" {rest} more claim{'s' if rest != 1 else ''} in its {link}." if rest else "")
        if not shown:
            more = f" No claim decided at this setting ({rest} undecided): its {link}."
        text = " ".join(s["text"] for s in shown)
        lines.append(f"- **`{Path(d).name}`**: {text}{more}".replace(":  ", ": "))
    return "\n".join(lines) + "\n"


def rewrite(text: str, root: str | Path = ".") -> str:
    """``text`` with every verdicts block regenerated from the ledgers its opening line names."""
    def block(m) -> str:
        dirs = m.group("dirs").split()
        return (m.group(1) + table(Path(root), dirs) + "\n" + found(Path(root), dirs)
                + m.group(4))

    return BLOCK.sub(block, text)


def rewrite_file(path: str | Path) -> int:
    """Regenerate the verdicts blocks of a Markdown file in place; returns how many there are."""
    path = Path(path)
    text = path.read_text()
    path.write_text(rewrite(text, path.parent))
    return len(BLOCK.findall(text))
