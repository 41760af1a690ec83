"""The tables the claims ledger reads, known without importing it (pandas, scipy): the workflow's
claims job and each replication round's ledger take these tables as inputs and no others, so a
study's largest tables (partition boundaries and maps, activation quantiles, probe curves:
figures only) are not read, sorted and held in memory by every round.

:data:`TABLES` is derived, not listed: each claim declares its table (``Claim(key, paper, claim,
table, ...)`` or ``table=``), read here from the claims package's source with :mod:`ast`, plus
the tables the ledger reads for every claim, :data:`ALWAYS`. A new claim on a new table adds its
table here with no edit. ``tests/test_claims.py`` checks that this is exactly what
:func:`bnstudy.claims.ledger.evaluate` reads.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

# read whatever the claims are: the training table (seed counts, collapse and warm-up notes,
# bnstudy.claims.say.annotate) and the Dannemann analysis' (its ledger rows,
# bnstudy.claims.decide.dannemann)
ALWAYS = ("training", "dannemann")
TABLE_ARG = 3  # Claim(key, paper, claim, table, ...)


def claim_tables(source: str, where: str = "<source>") -> set[str]:
    """The tables of the ``Claim(...)`` calls in ``source``; a table that is not a string
    literal is an error naming the claim (the claims job must know it without running code)."""
    out = set()
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Claim"):
            continue
        given = {k.arg: k.value for k in node.keywords}
        arg = node.args[TABLE_ARG] if len(node.args) > TABLE_ARG else given.get("table")
        if not (isinstance(arg, ast.Constant) and isinstance(arg.value, str)):
            raise ValueError(f"{where}, line {node.lineno}: a Claim's table must be a string "
                             f"literal (Claim(key, paper, claim, \"<table>\", ...)), so that "
                             f"bnstudy.claims.declare.reads knows the claims job's inputs without "
                             f"importing the ledger; got {ast.unparse(arg) if arg else 'none'}")
        out.add(arg.value)
    return out


@functools.cache
def tables() -> tuple[str, ...]:
    """Every table a claim of the package declares, and :data:`ALWAYS`, sorted (read once a
    process, when first asked for: :data:`TABLES`)."""
    found = set(ALWAYS)
    for path in sorted(Path(__file__).resolve().parents[1].rglob("*.py")):  # all of claims/
        found |= claim_tables(path.read_text(encoding="utf-8"), path.name)
    return tuple(sorted(found))



def __getattr__(name: str):
    if name == "TABLES":  # parsed when first asked for, not by every process importing this
        return tables()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
