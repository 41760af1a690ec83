"""The command line's verbs that read what exists and write no workflow output: the registries
(``list``), the ledgers and README blocks (``ledger``, ``columns``), the variance split
(``variance``) and the comparison of two studies (``compare``). :mod:`bnstudy.cli.main` dispatches
them with the workflow's verbs; each imports what it needs when it runs."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

log = logging.getLogger("bnstudy")


def cmd_list(a) -> None:
    """Each registry's names; a normalizer's options (default: meaning) follow it, generated
    from its registration, the one place they are declared."""
    from bnstudy.networks import normalizers
    from bnstudy.planning.catalog import registries

    for what, entries in registries().items():
        if a.what not in ("all", what):
            continue
        print(f"{what}:")
        for name, text in entries.items():
            print(f"  {name:26s} {text}".rstrip())
            if what == "normalizers":
                for line in normalizers.REGISTRY[name].option_help():
                    print(f"  {'':26s}   {line}")


DEFAULT_CONFIG = "config/config.yaml"
LEDGER = ("claim_id", "verdict")  # the columns without which a table is no claims ledger


def read_ledger(results_dir: str | Path):
    """``<results_dir>/tables/claims.parquet``, read by the one checked reader
    (:func:`bnstudy.io.read_table`: a flipped byte, a foreign or truncated file is refused,
    naming it) and checked to be a claims ledger."""
    from bnstudy import io

    path = Path(results_dir) / "tables" / "claims.parquet"
    if not path.is_file():
        hint = (" (it is a file: give the results directory that holds tables/)"
                if Path(results_dir).is_file() else "")
        raise FileNotFoundError(f"no claims ledger at {path}{hint}: run that study first "
                                f"(snakemake --cores 2 --configfile config/studies/<name>.yaml)")
    ledger = io.read_table(path)
    missing = [c for c in LEDGER if c not in ledger.columns]
    if missing:
        have = ", ".join(map(str, ledger.columns))
        raise ValueError(f"{path} is not a claims ledger: it has no column "
                         f"{', '.join(missing)} (its columns: {have})")
    return ledger


def default_results(config: str = DEFAULT_CONFIG) -> str:
    """The default study's results directory: ``results:`` of ``config`` (with its
    ``extends:`` chain), read from the working directory."""
    from bnstudy.config import study

    if not Path(config).is_file():
        raise FileNotFoundError(f"ledger: name the results directories whose ledgers to print "
                                f"(python -m bnstudy ledger results/<study>), or run it in the "
                                f"project directory, where {config} names the default study's "
                                f"results directory ({config} is not here)")
    return str(study.load([config]).get("results", "results"))


def cmd_ledger(a) -> None:
    from bnstudy.claims.say import markdown as ledger_markdown

    if a.readme:
        from bnstudy.planning import counts as study_counts

        root = Path(a.readme).parent  # every ledger a block names, verified before any rewrite
        from bnstudy.report import readme as verdict_table

        text = Path(a.readme).read_text()
        for d in [m.group("dir").strip() for m in ledger_markdown.BLOCK.finditer(text)] + [
                d for m in verdict_table.BLOCK.finditer(text) for d in m.group("dirs").split()]:
            read_ledger(root / d)
        target = Path(a.readme)
        if a.check:  # the same rewrite on a copy beside it (paths are relative to the file)
            target = target.with_name(f".{target.name}.check")
            shutil.copyfile(a.readme, target)
        try:
            n = ledger_markdown.rewrite_file(str(target))
            k = study_counts.rewrite_file(str(target))
            n += verdict_table.rewrite_file(str(target))
            if a.check:
                same = target.read_text() == Path(a.readme).read_text()
                log.info("%s: %d ledger and %d counts block(s) %s", a.readme, n, k,
                         "up to date" if same else "STALE: run without --check to rewrite")
                if not same:
                    raise SystemExit(1)
                return
        finally:
            if a.check:
                target.unlink(missing_ok=True)
        log.info("%s: %d ledger block(s) and %d counts block(s) regenerated", a.readme, n, k)
    for d in a.results or ([] if a.readme else [default_results()]):
        print(f"## {d}\n\n{ledger_markdown.table(read_ledger(d))}")


def cmd_ship(a) -> None:
    from bnstudy.report import ship

    done = ship.ship(a.results, a.dest)
    log.info("shipped %d file(s) of %s into %s: %.1f MB", len(done), a.results, a.dest,
             ship.size_mb(a.dest))


def cmd_columns(a) -> None:
    from bnstudy import column_docs

    if a.readme:
        changed = column_docs.rewrite_file(a.readme)
        log.info("%s: column block %s", a.readme, "regenerated" if changed else "up to date")
    else:
        print(column_docs.markdown(), end="")


def cmd_variance(a) -> None:
    from bnstudy import io
    from bnstudy.claims.values import variance

    for p in a.tables:
        out = variance.split_measure(Path(p).stem, io.read_table(p))
        print(f"## {p}\n\n{out.to_string(index=False, float_format='{:.4g}'.format)}\n")


def cmd_compare(a) -> int:
    from bnstudy.claims.say import compare

    diff = compare.compare(read_ledger(a.a), read_ledger(a.b), a.tol)
    if a.verdicts:
        diff = compare.verdict_changes(diff)
        print(compare.markdown(diff))
        return 1 if len(diff) else 0
    print(compare.text(diff, a.a, a.b))
    return 1 if len(diff) else 0
