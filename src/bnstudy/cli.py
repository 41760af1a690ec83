"""Command line: ``python -m bnstudy <verb> ...``, the only thing workflow rules call.

Every option a verb needs is explicit; structured options travel as JSON strings (never
evaluated as code). Inputs are validated before any expensive work starts.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time

log = logging.getLogger("bnstudy")


def _json(text: str):
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise argparse.ArgumentTypeError(f"not valid JSON: {text!r} ({e})") from None


def _set_threads(n: int) -> None:
    import torch

    torch.set_num_threads(max(1, n))




def cmd_check(a) -> None:
    from bnstudy import study

    files = a.configfiles or ["config/config.yaml"]
    cfg = study.check(study.load(files), local=not a.cluster)
    runs = sum(len(e["norms"]) * len(e["seeds"]) for e in cfg["experiments"].values())
    print(f"{', '.join(map(str, files))}: config OK ({len(cfg['experiments'])} experiments, "
          f"{runs} training runs)")


def cmd_prepare_data(a) -> None:
    from bnstudy import data

    ds = data.make(a.kind, a.options)
    ds.meta["name"] = a.name
    data.save(ds, a.out)
    log.info("dataset %s (%s): %d train, %d test, input %s", a.name, a.kind,
             len(ds.x_train), len(ds.x_test), ds.input_shape)


def cmd_train(a) -> None:
    from bnstudy import data, io
    from bnstudy.train import checkpoints
    from bnstudy.train import loop as training
    from bnstudy.train.spec import RunSpec

    spec = RunSpec.parse(a.spec, source="--spec")  # typed from here on
    training.resolve_device(a.device)
    _set_threads(a.threads)
    ds = data.load(a.data)
    t0 = time.perf_counter()
    result = training.train(spec, ds, a.device, resume_path=a.resume)
    hist = training.history_frame(result)
    for k, v in spec.ids.items():
        hist[k] = v
    prov = io.provenance(io.stable_hash(spec.to_dict()), result["device"])
    io.write_table(hist, a.out_history, prov)
    checkpoints.save(result, a.out_checkpoints)
    if a.resume:
        from pathlib import Path

        Path(a.resume).unlink(missing_ok=True)
    log.info("trained %s in %.1fs on %s (diverged=%s)", spec.ids,
             time.perf_counter() - t0, result["device"], result["diverged"])


def cmd_measure(a) -> None:
    from pathlib import Path

    import pandas as pd

    from bnstudy import data, io, measures, tables
    from bnstudy.train import checkpoints
    from bnstudy.train import loop as training

    measure = measures.get(a.name)
    outs = {Path(o).stem: o for o in a.out}  # <table>.parquet
    if sorted(outs) != sorted(measure.tables) or len(outs) != len(a.out):
        raise ValueError(f"measure {a.name!r} writes tables {list(measure.tables)}, one file "
                         f"<table>.parquet each; --out gave {a.out}")
    if sorted(a.grid) != [a.experiment]:
        raise ValueError(f"--grid must hold exactly the experiment {a.experiment!r}, "
                         f"got {sorted(a.grid)}")
    options = measure.options.parse(a.options)  # checked once, here; typed from now on
    files = tables.grid_files(a.results, a.grid, "checkpoints.pt")
    dev = training.resolve_device(a.device)
    _set_threads(a.threads)
    ds = data.load(a.data)
    rows: dict[str, list[pd.DataFrame]] = {t: [] for t in measure.tables}
    specs, t0 = [], time.perf_counter()
    for i, path in enumerate(files, 1):
        t1 = time.perf_counter()
        run = checkpoints.load(path)
        specs.append(run["spec"].to_dict())
        result = measures.as_tables(measure, measure.run(run, ds, options, dev))
        for table in measure.tables:
            df = pd.DataFrame(result.get(table, []))
            for k, v in run["spec"].ids.items():
                df[k] = v
            rows[table].append(df)
        log.info("%s: run %d/%d %s done in %.1fs (%s)", a.name, i, len(files),
                 run["spec"].ids, time.perf_counter() - t1,
                 ", ".join(f"{t}: {len(rows[t][-1])} rows" for t in measure.tables))
    prov = io.provenance(io.stable_hash([specs, a.name, a.options]), str(dev),
                         measure=a.name, options=a.options, runs=len(files))
    for table, path in outs.items():
        frames = [f for f in rows[table] if len(f)] or rows[table][:1]
        io.write_table(pd.concat(frames, ignore_index=True), path, prov)
    log.info("%s on experiment %s: %d runs in %.1fs", a.name, a.experiment, len(files),
             time.perf_counter() - t0)


def cmd_analysis(a) -> None:
    import pandas as pd

    from bnstudy import analyses, io

    analysis = analyses.get(a.name)
    _set_threads(a.threads)
    t0 = time.perf_counter()
    rows = analysis.run(a.options)
    prov = io.provenance(io.stable_hash([a.name, a.options]), "cpu", analysis=a.name,
                         options=a.options)
    io.write_table(pd.DataFrame(rows), a.out, prov)
    log.info("analysis %s: %d rows in %.1fs", a.name, len(rows), time.perf_counter() - t0)


def cmd_claims(a) -> None:
    from pathlib import Path

    from bnstudy import io
    from bnstudy.claims import ledger as claims

    frames = {Path(p).stem: io.read_table(p) for p in a.tables}
    ledger = claims.evaluate(frames, level=a.ci)
    hashes = [io.read_provenance(p).get("config_hash") for p in a.tables]
    io.write_table(ledger, a.out, io.provenance(io.stable_hash([hashes, a.ci]), "cpu"))
    counts = ledger["verdict"].value_counts().to_dict()
    log.info("claims ledger: %d rows, verdicts %s", len(ledger), counts)


def cmd_aggregate(a) -> None:
    from bnstudy import tables

    tables.aggregate_grid(a.results, a.grid, a.name, a.out, level=a.level)


def cmd_plot(a) -> None:
    from bnstudy import plots

    outs = dict(o.split("=", 1) for o in a.out)
    plots.render_all(a.family, a.table, {(None if k == "study" else k): v
                                         for k, v in outs.items()}, a.options)


def cmd_report(a) -> None:
    from bnstudy.report import build as report

    report.build(a.config, a.tables, a.figures, a.out)


def cmd_list(a) -> None:
    from bnstudy.catalog import registries

    for what, entries in registries().items():
        if a.what not in ("all", what):
            continue
        print(f"{what}:")
        for name, text in entries.items():
            print(f"  {name:26s} {text}".rstrip())


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("bnstudy")
    except PackageNotFoundError:  # run from a source tree without installing
        return "unknown (not installed)"


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bnstudy", description=__doc__)
    p.add_argument("-v", "--verbose", action="store_true", help="log debug messages too")
    p.add_argument("--version", action="version", version=f"bnstudy {_version()}")
    sub = p.add_subparsers(dest="verb", required=True)

    s = sub.add_parser("list", help="what a config can name: normalizers, measures, dataset "
                       "kinds (with their options), architectures, analyses, figures")
    s.add_argument("what", nargs="?", default="all", choices=["all", "normalizers", "measures",
                   "datasets", "architectures", "analyses", "figures"],
                   help="one registry (default: all)")
    s.set_defaults(func=cmd_list)

    s = sub.add_parser("check", help="check study config files as the workflow does, no job")
    s.add_argument("configfiles", nargs="*", help="config files (each with its "
                   "extends: chain), merged in order, sweeps expanded (default config/config.yaml)")
    s.add_argument("--cluster", action="store_true",
                   help="jobs run elsewhere: do not require a CUDA device on this machine")
    s.set_defaults(func=cmd_check)

    s = sub.add_parser("prepare-data", help="generate or load a dataset into an .npz file")
    s.add_argument("--name", required=True, help="the dataset's name in the config")
    s.add_argument("--kind", required=True,
                   help="the dataset kind (`python -m bnstudy list datasets`)")
    s.add_argument("--options", type=_json, default={}, help="the dataset's options as JSON")
    s.add_argument("--out", required=True, help="the prepared dataset (.npz)")
    s.set_defaults(func=cmd_prepare_data)

    s = sub.add_parser("train", help="train one run and write checkpoints and history")
    s.add_argument("--data", required=True, help="the prepared dataset (.npz)")
    s.add_argument("--spec", type=_json, required=True, help="run spec as JSON")
    s.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N")
    s.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    s.add_argument("--resume", default=None, help="resume-state file (kept until success)")
    s.add_argument("--out-checkpoints", required=True,
                   help="the run file: checkpoints, batches, optimizer states (.pt)")
    s.add_argument("--out-history", required=True, help="the training history table (.parquet)")
    s.set_defaults(func=cmd_train)

    s = sub.add_parser("measure", help="run a registered measure over every run of one "
                       "experiment (each run's checkpoints file under the results directory)")
    s.add_argument("name", help="the measure (`python -m bnstudy list measures`)")
    s.add_argument("--results", required=True, help="the results directory holding the runs")
    s.add_argument("--experiment", required=True, help="the experiment whose runs to measure")
    s.add_argument("--grid", type=_json, required=True,
                   help='the experiment\'s runs as JSON: {"<experiment>": {"norms": [...], '
                        '"seeds": [...]}}')
    s.add_argument("--data", required=True, help="the experiment's prepared dataset (.npz)")
    s.add_argument("--options", type=_json, default={},
                   help="the measure's config section as JSON (checked against its options)")
    s.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N")
    s.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    s.add_argument("--out", nargs="+", required=True, metavar="PATH",
                   help="one file per table the measure writes, named <table>.parquet")
    s.set_defaults(func=cmd_measure)

    s = sub.add_parser("analysis", help="run a registered study-level analysis into a table")
    s.add_argument("name", help="the analysis (`python -m bnstudy list analyses`)")
    s.add_argument("--options", type=_json, default={}, help="the analysis's options as JSON")
    s.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    s.add_argument("--out", required=True, help="the analysis's table (.parquet)")
    s.set_defaults(func=cmd_analysis)

    s = sub.add_parser("claims", help="evaluate the claims ledger from the aggregated tables")
    s.add_argument("--tables", nargs="+", required=True,
                   help="the aggregated tables the claims read")
    s.add_argument("--ci", type=float, default=0.95, help="confidence level of the intervals")
    s.add_argument("--out", required=True, help="the claims ledger (.parquet)")
    s.set_defaults(func=cmd_claims)

    s = sub.add_parser("ledger", help="print a study's claims ledger as Markdown, or rewrite "
                       "the ledger blocks of a Markdown file (the README) from the ledgers")
    s.add_argument("results", nargs="*", help="results directories whose ledgers to print")
    s.add_argument("--readme", help="Markdown file whose <!-- ledger: DIR --> blocks to rewrite")
    s.set_defaults(func=cmd_ledger)

    s = sub.add_parser("aggregate", help="concatenate every run's per-run table into one table")
    s.add_argument("--results", required=True, help="the results directory")
    s.add_argument("--name", required=True,
                   help="the per-run or per-experiment file, e.g. history.parquet")
    s.add_argument("--grid", type=_json, required=True,
                   help='the runs as JSON: {"<experiment>": {"norms": [...], "seeds": [...], '
                        '"axes": {...}}}; the axes become columns')
    s.add_argument("--level", choices=["run", "experiment"], default="run",
                   help="whether the parts are per-run files or per-experiment files")
    s.add_argument("--out", required=True, help="the aggregated table (.parquet)")
    s.set_defaults(func=cmd_aggregate)

    s = sub.add_parser("plot", help="draw every figure of one figure family from its tables")
    s.add_argument("family", help="the figure family (`python -m bnstudy list figures`)")
    s.add_argument("--table", nargs="+", required=True, help="the tables the family reads")
    s.add_argument("--options", type=_json, default={}, help="the config's plots section as JSON")
    s.add_argument("--out", nargs="+", required=True, metavar="EXPERIMENT=PNG",
                   help="each figure to draw: the experiment (or 'study') and its file")
    s.set_defaults(func=cmd_plot)

    s = sub.add_parser("report", help="build the self-contained HTML report")
    s.add_argument("--config", type=_json, required=True, help="the study config as JSON")
    s.add_argument("--tables", nargs="+", required=True,
                   help="the aggregated tables and the claims ledger")
    s.add_argument("--figures", nargs="+", required=True, help="the figures to embed (.png)")
    s.add_argument("--out", required=True, help="the report (.html)")
    s.set_defaults(func=cmd_report)
    return p


def cmd_ledger(a) -> None:
    from bnstudy.claims import markdown as ledger_markdown

    if a.readme:
        n = ledger_markdown.rewrite_file(a.readme)
        log.info("%s: %d ledger block(s) regenerated", a.readme, n)
    for d in a.results:
        print(f"## {d}\n\n{ledger_markdown.table(ledger_markdown.read(d))}")


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    from bnstudy.data.files import DataUnavailable

    try:
        args.func(args)
    except (ValueError, FileNotFoundError, DataUnavailable) as e:
        print(f"bnstudy {args.verb}: error: {e}", file=sys.stderr)
        return 2
    return 0
