"""The command line's verbs (``python -m bnstudy <verb> ...``, the only thing workflow rules
call); their arguments and help are in :mod:`bnstudy.cli.args`. Each verb imports what it needs
when it runs, so a verb that only reads tables does not import torch."""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import sys
import time
from pathlib import Path

from bnstudy.cli.args import parser
from bnstudy.cli.check import cmd_check
from bnstudy.cli.results import (
    cmd_columns,
    cmd_compare,
    cmd_ledger,
    cmd_list,
    cmd_ship,
    cmd_variance,
)
from bnstudy.jobs import lifeline, run_writer

log = logging.getLogger("bnstudy")


def _set_threads(n: int) -> None:
    import torch

    torch.set_num_threads(max(1, n))


def cmd_verify(a) -> int:
    from bnstudy import verify

    verdict = verify.check_study(a.results)
    print(verify.report(verdict))
    return 1 if verdict.bad else 0


def cmd_prepare_data(a) -> None:
    from bnstudy import data

    ds = data.make(a.kind, a.options)
    ds.meta["name"] = a.name
    data.save(ds, a.out)
    log.info("dataset %s (%s): %d train, %d test, input %s", a.name, a.kind,
             len(ds.x_train), len(ds.x_test), ds.input_shape)


def cmd_train(a) -> None:
    from bnstudy.tables import binding
    from bnstudy.train.spec import RunSpec

    specs = [RunSpec.parse(s, source="--spec") for s in a.spec]  # typed from here on
    resumes = a.resume or [None] * len(specs)
    for name, given in (("--resume", resumes), ("--out-checkpoints", a.out_checkpoints),
                        ("--out-history", a.out_history)):
        if len(given) != len(specs):
            raise ValueError(f"{name}: {len(given)} value(s) for {len(specs)} --spec; give "
                             "one per run spec, in the same order")
    for spec, res, ck, hist in zip(specs, resumes, a.out_checkpoints, a.out_history,
                                   strict=True):
        binding.check_outputs([hist, ck, *([res] if res else [])],
                              binding.run_place(spec.experiment, spec.norm, spec.seed))
    with contextlib.ExitStack() as held:  # one writer per run directory of the block
        for spec, hist in zip(specs, a.out_history, strict=True):
            held.enter_context(run_writer.one_writer(
                os.path.dirname(os.path.abspath(hist)),
                f"train {spec.experiment}/{spec.norm}/seed{spec.seed}"))
        _train(a, specs, resumes)


def _train(a, specs, resumes) -> None:
    from bnstudy import data, io
    from bnstudy.train import checkpoints
    from bnstudy.train import loop as training

    training.resolve_device(a.device)
    _set_threads(a.threads)
    ds = data.load(a.data)
    t0 = time.perf_counter()
    results = training.train_block(specs, ds, a.device, resume_paths=resumes)
    for spec, result, res, ck, out in zip(specs, results, resumes, a.out_checkpoints,
                                          a.out_history, strict=True):
        hist = training.history_frame(result)
        for k, v in spec.ids.items():
            hist[k] = v
        prov = io.provenance(io.stable_hash(spec.to_dict()), result["device"],
                             config=spec.to_dict())
        io.write_table(hist, out, prov)
        checkpoints.save(result, ck)
        if res:  # the resume file and its checkpoint files: no stray file after success
            from bnstudy.train import resume

            resume.remove(res)
        log.info("trained %s in %.1fs on %s (diverged=%s)", spec.ids,
                 time.perf_counter() - t0, result["device"], result["diverged"])


def cmd_measure(a) -> None:

    from bnstudy import measures
    from bnstudy.tables import binding, layout

    measure = measures.get(a.name)
    outs = {Path(o).stem: o for o in a.out}  # <table>.parquet
    if sorted(outs) != sorted(measure.tables) or len(outs) != len(a.out):
        raise ValueError(f"measure {a.name!r} writes tables {list(measure.tables)}, one file "
                         f"<table>.parquet each; --out gave {a.out}")
    if sorted(a.grid) != [a.experiment]:
        raise ValueError(f"--grid must hold exactly the experiment {a.experiment!r}, "
                         f"got {sorted(a.grid)}")
    options = measure.options.parse(a.options)  # checked once, here; typed from now on
    files = layout.grid_files(a.results, a.grid, "checkpoints.pt")  # checks the grid
    place = binding.block_place(a.experiment, a.grid[a.experiment]["seeds"])
    binding.check_outputs(a.out, place)
    with run_writer.one_writer(os.path.dirname(os.path.abspath(a.out[0])),
                               f"measure {a.name} on {a.experiment}", files=a.name):
        _measure(a, measure, options, files, place, outs)


def _measure(a, measure, options, files, place, outs) -> None:
    import pandas as pd

    from bnstudy import data, io, measures
    from bnstudy.tables import binding
    from bnstudy.train import checkpoints
    from bnstudy.train import loop as training

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
                         measure=a.name, options=a.options, runs=len(files),
                         **{binding.KEY: place})
    for table, path in outs.items():
        frames = [f for f in rows[table] if len(f)] or rows[table][:1]
        io.write_table(pd.concat(frames, ignore_index=True), path, prov)
    log.info("%s on experiment %s: %d runs in %.1fs", a.name, a.experiment, len(files),
             time.perf_counter() - t0)


def cmd_analysis(a) -> None:
    import pandas as pd

    from bnstudy import analyses, io

    analysis = analyses.get(a.name)
    options = analysis.options.parse(a.options)  # checked once, here; typed from now on
    _set_threads(a.threads)
    t0 = time.perf_counter()
    rows = analysis.run(options)
    prov = io.provenance(io.stable_hash([a.name, a.options]), "cpu", analysis=a.name,
                         options=a.options)
    io.write_table(pd.DataFrame(rows), a.out, prov)
    log.info("analysis %s: %d rows in %.1fs", a.name, len(rows), time.perf_counter() - t0)


def cmd_claims(a) -> None:

    import pandas as pd

    from bnstudy import io
    from bnstudy.claims import ledger as claims
    from bnstudy.claims.decide import sequential

    frames = {Path(p).stem: io.read_table(p) for p in a.tables}
    ran = frames.get("training", pd.DataFrame(columns=["experiment", "seed"]))
    seeds = ran.groupby("experiment")["seed"].nunique().to_dict() if len(ran) else {}
    levels = sequential.interval_levels(a.plans, seeds, a.ci)
    ledger = claims.evaluate(frames, level=a.ci, levels=levels, setups=a.setup)
    hashes = [io.read_provenance(p).get("config_hash") for p in a.tables]
    io.write_table(ledger, a.out, io.provenance(io.stable_hash([hashes, a.ci, a.setup]), "cpu",
                                                 torch_free=True))
    counts = ledger["verdict"].value_counts().to_dict()
    adjusted = ledger["adjusted_verdict"].value_counts().to_dict()
    log.info("claims ledger: %d rows, verdicts %s, adjusted (Holm) %s", len(ledger), counts,
             adjusted)


def cmd_replication_round(a) -> None:
    from bnstudy.replication import rounds

    record = rounds.decide(a.results, a.round, a.grid, a.tables, a.plans, a.ci, a.open)
    rounds.write(record, a.out)
    for e, x in record["experiments"].items():
        if x["open"]:
            log.info("round %d: %s at %d seeds: %s (%d undecided rows)", a.round, e,
                     x["n_seeds"], "continues" if x["continue"] else "stops",
                     len(x["undecided"]))


def cmd_replication_table(a) -> None:
    from bnstudy.replication import rounds

    df = rounds.table(a.rounds, a.out)
    log.info("replication table: %d rows over %d rounds", len(df), len(a.rounds))


def cmd_aggregate(a) -> None:
    from bnstudy.tables import aggregation

    aggregation.aggregate_grid(a.results, a.grid, a.name, a.out, level=a.level)


def cmd_plot(a) -> None:
    from bnstudy import plots

    outs = dict(o.split("=", 1) for o in a.out)
    plots.render_all(a.family, a.table, {(None if k == "study" else k): v
                                         for k, v in outs.items()}, a.options)


def cmd_report(a) -> None:
    from bnstudy.report import build as report

    report.build(a.config, a.tables, a.figures, a.out, a.paper_configs)


COMMANDS = {"list": cmd_list, "check": cmd_check, "verify": cmd_verify,
            "prepare-data": cmd_prepare_data,
            "train": cmd_train, "measure": cmd_measure, "analysis": cmd_analysis,
            "claims": cmd_claims, "ledger": cmd_ledger, "columns": cmd_columns,
            "aggregate": cmd_aggregate,
            "replication-round": cmd_replication_round,
            "replication-table": cmd_replication_table,
            "plot": cmd_plot, "report": cmd_report, "variance": cmd_variance,
            "compare": cmd_compare, "ship": cmd_ship}


# A write that failed for the disk exits with the errno (Snakemake shows a job's exit status, and
# the job's log may be empty: it lies on the same full disk; docs/safety.md)
DISK_STATUS = {e: e for e in (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EFBIG)}


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    lifeline.watch()  # a job of a local Snakemake ends with it (own process or fork server)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    from bnstudy.data.files import DataUnavailable
    from bnstudy.io import WriteFailed

    try:
        rc = COMMANDS[args.verb](args)
        sys.stdout.flush()
    except (ValueError, FileNotFoundError, DataUnavailable, WriteFailed) as e:
        try:  # the log may lie on the full disk: the exit status says it too
            print(f"bnstudy {args.verb}: error: {e}", file=sys.stderr)
        except OSError:
            pass
        return DISK_STATUS.get(e.errno, 2) if isinstance(e, WriteFailed) else 2
    except BrokenPipeError:
        # the reader closed the pipe (`... | head`): stop quietly, as the Python docs advise
        # (point stdout at devnull so that the interpreter's final flush cannot fail again)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    return rc or 0
