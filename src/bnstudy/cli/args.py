"""The command line's arguments: every verb, its options and their help (``python -m bnstudy
<verb> --help``). The verbs themselves are in :mod:`bnstudy.cli.main`."""

from __future__ import annotations

import argparse
import json

DESCRIPTION = """Run a study with Snakemake, which calls the verbs below:

  python -m bnstudy check config/config.yaml   # check it; says how long it should take here
  snakemake --cores 2                          # the default study (config/config.yaml)
  snakemake --cores 2 --configfile config/studies/<name>.yaml   # another study
  open results/report.html                     # the answer first, then the evidence
  python -m bnstudy ledger results             # the claims ledger as Markdown

Your own normalizer or data: EXTENDING.md ("Your own normalizer or data, without forking").
The first verbs are for people; those marked [plumbing] are what the workflow's rules run (every
option explicit, structured options as JSON, never evaluated; @FILE stands for the arguments in
FILE, one per line)."""
# the verbs a person runs, in this order; the others are the workflow's (marked [plumbing])
USER_VERBS = ("check", "list", "ledger", "compare", "verify", "ship", "columns", "variance")
PLUMBING = "[plumbing] "


def json_arg(text: str):
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise argparse.ArgumentTypeError(f"not valid JSON: {text!r} ({e})") from None


def tolerance(text: str) -> float:
    """``--tol``: a finite relative difference >= 0."""
    try:
        tol = float(text)
    except ValueError:
        tol = float("nan")
    if not (tol >= 0 and tol != float("inf")):
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0 (a relative difference "
                                         f"of effects, 0 for identical numbers), got {text!r}")
    return tol


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("bnstudy")
    except PackageNotFoundError:  # run from a source tree without installing
        return "unknown (not installed)"


def parser() -> argparse.ArgumentParser:
    # @FILE: arguments read from FILE, one per line (the workflow passes the ones that grow
    # with the study so, bnstudy.planning.arguments.write_arguments)
    p = argparse.ArgumentParser(prog="python -m bnstudy", description=DESCRIPTION,
                                fromfile_prefix_chars="@",
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-v", "--verbose", action="store_true", help="log debug messages too")
    p.add_argument("--version", action="version", version=f"bnstudy {_version()}")
    sub = p.add_subparsers(dest="verb", required=True, metavar="VERB",
                           title="verbs (for people first, then the workflow's plumbing)")

    s = sub.add_parser("list", help="what a config can name: normalizers, measures, dataset "
                       "kinds (with their options), architectures, analyses, figures")
    s.add_argument("what", nargs="?", default="all", choices=["all", "normalizers", "measures",
                   "datasets", "architectures", "analyses", "figures"],
                   help="one registry (default: all)")

    s = sub.add_parser("check", help="check study config files as the workflow does, no job")
    s.add_argument("configfiles", nargs="*", help="config files (each with its extends: "
                   "chain), each checked on its own, sweeps expanded (default config/config.yaml)")
    s.add_argument("--merge", action="store_true", help="merge the files in order into one "
                   "study first, as `snakemake --configfile A B` does")
    s.add_argument("--all", action="store_true",
                   help="also check every shipped study (config/studies/*.yaml)")
    s.add_argument("--cluster", action="store_true",
                   help="jobs run elsewhere: do not require a CUDA device on this machine, "
                   "and print each rule's requests (GPU, memory, time) estimated from the study")
    s.add_argument("--cost-header", action="store_true",
                   help="rewrite the generated cost block of each named config file's header "
                   "in place (the study's estimated GPU- and CPU-hours per stage, from FLOP "
                   "counts, beside what --cluster requests; bnstudy.planning.cost); checks as "
                   "--cluster does")

    s = sub.add_parser("verify", help="check every checksummed file of a study (tables, run "
                       "files, datasets) and name the bad ones and what to rerun; exit 1 if any")
    s.add_argument("results", nargs="?", default="results",
                   help="the study's results directory (default: results)")

    s = sub.add_parser("prepare-data", help="generate or load a dataset into an .npz file")
    s.add_argument("--name", required=True, help="the dataset's name in the config")
    s.add_argument("--kind", required=True,
                   help="the dataset kind (`python -m bnstudy list datasets`)")
    s.add_argument("--options", type=json_arg, default={}, help="the dataset's options as JSON")
    s.add_argument("--out", required=True, help="the prepared dataset (.npz)")

    s = sub.add_parser("train", help="train one run, or a block of seeds of one arm together, "
                       "and write each run's checkpoints and history")
    s.add_argument("--data", required=True, help="the prepared dataset (.npz)")
    s.add_argument("--spec", type=json_arg, required=True, nargs="+",
                   help="run spec as JSON; several: seeds of one arm, trained as one block")
    s.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N")
    s.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    s.add_argument("--resume", default=None, nargs="+",
                   help="resume-state file per run (kept until success)")
    s.add_argument("--out-checkpoints", required=True, nargs="+",
                   help="the run file per run: checkpoints, batches, optimizer states (.pt)")
    s.add_argument("--out-history", required=True, nargs="+",
                   help="the training history table per run (.parquet)")

    s = sub.add_parser("measure", help="run a registered measure over every run of one block of "
                       "an experiment's seeds (each run's checkpoints file under the results "
                       "directory)")
    s.add_argument("name", help="the measure (`python -m bnstudy list measures`)")
    s.add_argument("--results", required=True, help="the results directory holding the runs")
    s.add_argument("--experiment", required=True, help="the experiment whose runs to measure")
    s.add_argument("--grid", type=json_arg, required=True,
                   help='the experiment\'s runs as JSON: {"<experiment>": {"norms": [...], '
                        '"seeds": [...]}}')
    s.add_argument("--data", required=True, help="the experiment's prepared dataset (.npz)")
    s.add_argument("--options", type=json_arg, default={},
                   help="the measure's config section as JSON (checked against its options)")
    s.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N")
    s.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    s.add_argument("--out", nargs="+", required=True, metavar="PATH",
                   help="one file per table the measure writes, named <table>.parquet")

    s = sub.add_parser("analysis", help="run a registered study-level analysis into a table")
    s.add_argument("name", help="the analysis (`python -m bnstudy list analyses`)")
    s.add_argument("--options", type=json_arg, default={}, help="the analysis's options as JSON")
    s.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    s.add_argument("--out", required=True, help="the analysis's table (.parquet)")

    s = sub.add_parser("claims", help="evaluate the claims ledger from the aggregated tables")
    s.add_argument("--tables", nargs="+", required=True,
                   help="the aggregated tables the claims read")
    s.add_argument("--ci", type=float, default=0.95, help="confidence level of the intervals")
    s.add_argument("--plans", type=json_arg, default={},
                   help='the replicated experiments\' planned rounds as JSON, {"<experiment>": '
                        '{"rounds": [...], "spending": ...}}: their rows are read at the level of '
                        'the look they stopped at')
    s.add_argument("--setup", type=json_arg, default={},
                   help="each experiment's setting as JSON (bnstudy.claims.say.deviations.setups), "
                        "compared with each claim's paper protocol in the ledger's deviations")
    s.add_argument("--out", required=True, help="the claims ledger (.parquet)")

    s = sub.add_parser("replication-round", help="one replication round: the ledger of the "
                       "study as it stands and which experiments get the next round's seeds")
    s.add_argument("--results", required=True, help="the results directory")
    s.add_argument("--round", type=int, required=True, help="the round (0-based)")
    s.add_argument("--grid", type=json_arg, required=True,
                   help="every experiment's runs and blocks at this round, as JSON")
    s.add_argument("--tables", type=json_arg, required=True,
                   help='the tables as JSON, {"<table>": {"file", "level", "experiments"}}')
    s.add_argument("--plans", type=json_arg, required=True,
                   help="the replicated experiments' planned rounds, as JSON")
    s.add_argument("--open", type=json_arg, default=None,
                   help="the experiments still open at this round, as a JSON list (default: "
                        "those at look ROUND)")
    s.add_argument("--ci", type=float, default=0.95, help="overall level of the intervals")
    s.add_argument("--out", required=True, help="the round file (.json)")

    s = sub.add_parser("replication-table", help="gather the round files into one table")
    s.add_argument("--rounds", nargs="+", required=True, help="the round files, in order")
    s.add_argument("--out", required=True, help="the table (.parquet)")

    s = sub.add_parser("ledger", help="print a study's claims ledger as Markdown, or rewrite "
                       "the ledger blocks of a Markdown file (the README) from the ledgers")
    s.add_argument("results", nargs="*", help="results directories whose ledgers to print "
                   "(default, without --readme: the results directory of config/config.yaml)")
    s.add_argument("--readme", help="Markdown file whose <!-- ledger: DIR --> blocks (and "
                   "<!-- counts: CONFIG DIR --> blocks: bnstudy.planning.counts) to rewrite")
    s.add_argument("--check", action="store_true", help="with --readme: rewrite nothing, exit "
                   "1 when the blocks differ from what the ledgers and configs give")

    s = sub.add_parser("ship", help="copy a finished study's ledger, rounds and report (not "
                       "its runs) into a tracked folder such as studies/<name>/ "
                       "(bnstudy.report.ship)")
    s.add_argument("results", help="the study's results directory (results/<study>)")
    s.add_argument("dest", help="the folder to ship into (studies/<name>)")

    s = sub.add_parser("columns", help="print the column dictionary of the study's tables as "
                       "Markdown, or rewrite the column block of a Markdown file")
    s.add_argument("--readme", help="Markdown file (results/README.md) whose <!-- columns: "
                   "begin --> ... <!-- columns: end --> block to rewrite")

    s = sub.add_parser("compare", help="print the ledger rows whose verdicts or effects differ "
                       "between two results directories (exit status 1 when any do)")
    s.add_argument("a", help="a results directory (results/<study>)")
    s.add_argument("b", help="another results directory")
    s.add_argument("--tol", type=tolerance, default=1e-9,
                   help="effects within this relative difference count as equal (a finite "
                        "number >= 0; default 1e-9, 0: identical numbers only)")
    s.add_argument("--verdicts", action="store_true",
                   help="only the rows whose verdict or adjusted verdict changed, as Markdown "
                        "bullets with why each moved (a study's changed-verdict list)")

    s = sub.add_parser("variance", help="split each per-run quantity's variance between seeds "
                       "and the within-run sample (smoothness, ics, partition_density tables)")
    s.add_argument("tables", nargs="+", help="aggregated tables, named by measure "
                   "(e.g. results/tables/smoothness.parquet)")

    s = sub.add_parser("aggregate", help="concatenate every run's per-run table into one table")
    s.add_argument("--results", required=True, help="the results directory")
    s.add_argument("--name", required=True,
                   help="the per-run or per-block file, e.g. history.parquet")
    s.add_argument("--grid", type=json_arg, required=True,
                   help='the runs as JSON: {"<experiment>": {"norms": [...], "seeds": [...], '
                        '"axes": {...}}}; the axes become columns')
    s.add_argument("--level", choices=["run", "experiment"], default="run",
                   help="whether the parts are per-run files or per-block files (a measure's "
                        "table over one block of an experiment's seeds)")
    s.add_argument("--out", required=True, help="the aggregated table (.parquet)")

    s = sub.add_parser("plot", help="draw every figure of one figure family from its tables")
    s.add_argument("family", help="the figure family (`python -m bnstudy list figures`)")
    s.add_argument("--table", nargs="+", required=True, help="the tables the family reads")
    s.add_argument("--options", type=json_arg, default={},
                   help="the config's plots section as JSON")
    s.add_argument("--out", nargs="+", required=True, metavar="EXPERIMENT=PNG",
                   help="each figure to draw: the experiment (or 'study') and its file")

    s = sub.add_parser("report", help="build the self-contained HTML report")
    s.add_argument("--config", type=json_arg, required=True, help="the study config as JSON")
    s.add_argument("--tables", nargs="+", required=True,
                   help="the aggregated tables and the claims ledger")
    s.add_argument("--figures", nargs="+", required=True, help="the figures to embed (.png)")
    s.add_argument("--out", required=True, help="the report (.html)")
    s.add_argument("--paper-configs", nargs="*", default=[],
                   help="paper-scale study configs whose cost the report states")
    _people_first(sub)
    return p


def _people_first(sub) -> None:
    """List :data:`USER_VERBS` first in ``--help`` (argparse lists verbs as they are added), the
    others marked :data:`PLUMBING`."""
    actions = sub._choices_actions  # noqa: SLF001 (argparse keeps the listing order here)
    rank = {v: i for i, v in enumerate(USER_VERBS)}
    actions.sort(key=lambda a: rank.get(a.dest, len(rank)))
    for a in actions:
        if a.dest not in rank:
            a.help = PLUMBING + a.help
            sub.choices[a.dest].description = a.help
