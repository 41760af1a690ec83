"""The command line's verbs that read what exists and write no workflow output: the registries
(``list``), the ledgers and README blocks (``ledger``, ``columns``), the variance split
(``variance``) and the comparison of two studies (``compare``). :mod:`bnstudy.cli` dispatches
them with the workflow's verbs; each imports what it needs when it runs."""

from __future__ import annotations

import logging
from pathlib import Path

log = logging.getLogger("bnstudy")


def cmd_list(a) -> None:
    """Each registry's names; a normalizer's options (default: meaning) follow it, generated
    from its registration, the one place they are declared."""
    from bnstudy.catalog import registries
    from bnstudy.networks import normalizers

    for what, entries in registries().items():
        if a.what not in ("all", what):
            continue
        print(f"{what}:")
        for name, text in entries.items():
            print(f"  {name:26s} {text}".rstrip())
            if what == "normalizers":
                for line in normalizers.REGISTRY[name].option_help():
                    print(f"  {'':26s}   {line}")


def cmd_ledger(a) -> None:
    from bnstudy.claims import markdown as ledger_markdown

    if a.readme:
        from bnstudy import study_counts

        n = ledger_markdown.rewrite_file(a.readme)
        k = study_counts.rewrite_file(a.readme)
        log.info("%s: %d ledger block(s) and %d counts block(s) regenerated", a.readme, n, k)
    for d in a.results:
        print(f"## {d}\n\n{ledger_markdown.table(ledger_markdown.read(d))}")


def cmd_columns(a) -> None:
    from bnstudy import column_docs

    if a.readme:
        changed = column_docs.rewrite_file(a.readme)
        log.info("%s: column block %s", a.readme, "regenerated" if changed else "up to date")
    else:
        print(column_docs.markdown(), end="")


def cmd_variance(a) -> None:
    from bnstudy import io
    from bnstudy.claims import variance

    for p in a.tables:
        out = variance.split_measure(Path(p).stem, io.read_table(p))
        print(f"## {p}\n\n{out.to_string(index=False, float_format='{:.4g}'.format)}\n")


def cmd_compare(a) -> int:
    from bnstudy.claims import compare
    from bnstudy.claims import markdown as ledger_markdown

    diff = compare.compare(ledger_markdown.read(a.a), ledger_markdown.read(a.b), a.tol)
    print(compare.text(diff, a.a, a.b))
    return 1 if len(diff) else 0
