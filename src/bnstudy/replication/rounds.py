"""One replication round: the ledger of the study as it stands, and which experiments go on.

The workflow runs round ``k`` as a Snakemake checkpoint (``replication_round``) once every run
of the study's state ``k`` is trained and measured: each replicated experiment that is still
open holds the first ``rounds[k]`` seeds of its policy, every other experiment what it stopped
with (:meth:`bnstudy.replication.schedule.Rounds.state`). :func:`decide` computes the claims
ledger of that state exactly as the final ``claims`` job would (the same tables, read in memory;
every row over a replicated experiment's runs read at its look's level, Holm over the study's
family) and an open experiment continues iff one of the measured rows over its runs is undecided
after the adjustment and a planned round is left; the next round's seeds go to the normalizers
those rows compare (:func:`arms`), not to an arm no undecided row reads; a row over an arm
that holds its own budget's seeds (the policy's ``arms``) stops with it and is recorded in
``at_arm_budget``. The next round may skip
planned looks: it goes to the first planned look with at least the seeds those rows need
(``seeds_needed`` at the nearer boundary, capped at the last look:
:func:`bnstudy.replication.budget.next_look`), recorded as ``next_look``. The round file records
the state and the decisions; the plan reads it back to schedule the next round (or none), so the
rounds a study takes are a function of its config and its numbers alone, and a rerun of a
finished study reads the same files and schedules nothing.

:func:`table` gathers the round files into ``tables/replication.parquet``: one row per round,
replicated experiment and ledger row over its runs, for the report's account of which claims
stopped when, with how many seeds.
"""

from __future__ import annotations

import json

import pandas as pd

from bnstudy import io
from bnstudy.claims.decide import outcomes, sequential
from bnstudy.claims.ledger import evaluate
from bnstudy.replication import budget
from bnstudy.tables import aggregation

DECIDED = outcomes.DECIDED


def frames(results: str, grid: dict, spec: dict) -> dict[str, pd.DataFrame]:
    """The study's tables at this state, in memory: ``spec`` maps a table to ``{"file",
    "level", "experiments"}`` (where its parts live and over which experiments)."""
    out = {}
    for name, s in spec.items():
        sub = {e: grid[e] for e in s["experiments"] if e in grid}
        if sub:
            out[name] = aggregation.grid_table(results, sub, s["file"], s["level"])
    return out


def looks(plans: dict, grid: dict) -> dict[str, int]:
    """Each replicated experiment's current look, from the seeds it holds."""
    return {e: sequential.look_index(p["rounds"], len(grid[e]["seeds"]))
            for e, p in plans.items() if e in grid}


def _runs_of(row) -> set[str]:
    """The experiments a ledger row's runs come from (a contrast row names its baseline's)."""
    out = {str(row.get("experiment"))}
    if row.get("baseline") is not None and str(row.get("baseline")) != "":
        out.add(str(row["baseline"]))
    return out


def arms(rows, norms: list[str]) -> list[str]:
    """The normalizers of an experiment (``norms``) that ``rows`` compare: each row's own and
    its baseline's when that is one of them; all of them if a row names none (a pooled row)."""
    out = set()
    for r in rows:
        if str(r.get("norm")) not in norms:
            return list(norms)
        out.add(str(r["norm"]))
        if str(r.get("baseline")) in norms:
            out.add(str(r["baseline"]))
    return [n for n in norms if n in out]


def seed_counts(ledger: pd.DataFrame) -> pd.Series:
    """Each ledger row's seed count (0 where it has none): a ledger with no measured row has
    no ``n_seeds`` column at all."""
    if "n_seeds" not in ledger:
        return pd.Series(0.0, index=ledger.index)
    return pd.to_numeric(ledger["n_seeds"], errors="coerce").fillna(0)


def _row_budget(row, norms: list[str], plan: dict) -> int:
    """The most seeds every arm ``row`` compares may take: the smallest of their own budgets
    (``plan["arms"]``), the last look's for an arm without one."""
    rounds, caps = plan["rounds"], plan.get("arms") or {}
    return min(caps.get(n, rounds[-1]) for n in arms([row], norms))


def _movable(pending, norms: list[str], plan: dict, look: int) -> tuple[list, list[str]]:
    """The undecided rows that may take the next look's seeds (every arm they compare has a
    budget of at least that many: ``plan["arms"]``, the last look's where none is given), and
    the names of those that may not (``claim/experiment/norm``)."""
    rounds, caps = plan["rounds"], plan.get("arms") or {}
    if not caps or look >= len(rounds) - 1:
        return list(pending), []
    nxt = rounds[look + 1]
    movable, spent = [], []
    for r in pending:
        if _row_budget(r, norms, plan) >= nxt:
            movable.append(r)
        else:
            spent.append(f"{r['claim_id']}/{r['experiment']}/{r['norm']}")
    return movable, spent


def _reachable(plan: dict, look: int, rows, norms: list[str]) -> int:
    """``look``, or the last look before it that every arm of one of ``rows`` may still take
    (an arm's own budget: ``plan["arms"]``), so that a look a round adds serves a row."""
    rounds = plan["rounds"]
    top = max(_row_budget(r, norms, plan) for r in rows)
    while look > 0 and rounds[look] > top:
        look -= 1
    return look


def need(rows) -> float:
    """The most seeds any of ``rows`` (undecided ledger rows) needs at its nearer boundary
    (:func:`bnstudy.replication.budget.row_need`); NaN when none has an estimate."""
    found = [budget.row_need(r.get("seeds_needed"), r.get("seeds_needed_margin"))
             for r in rows]
    found = [x for x in found if x == x]
    return max(found) if found else float("nan")


def decide(results: str, k: int, grid: dict, spec: dict, plans: dict, level: float,
           open_: list[str] | None = None) -> dict:
    """Round ``k``'s record: the state's ledger rows over replicated experiments and, for each
    replicated experiment, its look, seeds, whether it gets more seeds and the look it goes to
    (``next_look``). ``open_``: the experiments still open at this round (None: those at look
    ``k``, as when every round went one look on)."""
    at = looks(plans, grid)
    levels = sequential.interval_levels(plans, {e: len(grid[e]["seeds"]) for e in at}, level)
    ledger = evaluate(frames(results, grid, spec), level, levels)
    measured = ledger[seed_counts(ledger) >= 2]
    claims, experiments = [], {}
    for e in sorted(at):
        # an experiment that stopped earlier is not open (it holds the look it stopped at)
        is_open = at[e] == k if open_ is None else e in open_
        rows = [r for _, r in measured.iterrows() if e in _runs_of(r)]
        pending = [r for r in rows if r["adjusted_verdict"] not in DECIDED]
        undecided = [f"{r['claim_id']}/{r['experiment']}/{r['norm']}" for r in pending]
        last = at[e] == len(plans[e]["rounds"]) - 1
        # a row over an arm at its own budget stops there (plans' "arms"): it takes no seeds
        movable, spent = _movable(pending, grid[e]["norms"], plans[e], at[e])
        go_on = bool(is_open and movable and not last)
        experiments[e] = {"look": at[e], "n_seeds": len(grid[e]["seeds"]), "open": is_open,
                          "continue": go_on, "undecided": undecided,
                          "norms": arms(movable, grid[e]["norms"]) if go_on else []}
        if spent:
            experiments[e]["at_arm_budget"] = spent
        if go_on:
            experiments[e]["next_look"] = _reachable(
                plans[e], budget.next_look(plans[e]["rounds"], at[e], need(movable)), movable,
                grid[e]["norms"])
        if is_open:
            claims += [{"experiment": e, "claim_id": r["claim_id"],
                        "row_experiment": str(r["experiment"]), "norm": str(r["norm"]),
                        "n_seeds": int(r["n_seeds"]), "verdict": r["verdict"],
                        "adjusted_verdict": r["adjusted_verdict"],
                        "interval_level": float(r["interval_level"])} for r in rows]
    return {"round": int(k), "level": float(level), "experiments": experiments,
            "claims": claims}


def write(record: dict, out: str) -> None:
    """The round file, replaced whole (:func:`bnstudy.io.write_bytes`)."""
    io.write_bytes(out, (json.dumps(record, indent=1, sort_keys=True) + "\n").encode())


def read(path: str) -> dict:
    """A round file's record; a file that is not one names itself."""
    try:
        with open(path, encoding="utf-8") as fh:
            record = json.load(fh)
        if not isinstance(record.get("experiments"), dict):
            raise ValueError("no experiments")
    except (OSError, ValueError, AttributeError) as e:
        raise ValueError(f"{path}: not a replication round file ({e})") from None
    return record


def table(paths: list[str], out: str) -> pd.DataFrame:
    """``tables/replication.parquet`` from the round files, in round order."""
    records = [read(p) for p in paths]
    rows = []
    for rec in records:
        for e, x in rec["experiments"].items():
            if not x["open"]:
                continue
            own = [c for c in rec["claims"] if c["experiment"] == e]
            base = {"round": rec["round"], "experiment": e, "n_seeds": x["n_seeds"],
                    "look": x["look"], "continue": x["continue"],
                    "next_norms": ",".join(x.get("norms", []))}
            rows += [{**base, **{k: v for k, v in c.items() if k != "experiment"}}
                     for c in own] or [{**base, "claim_id": ""}]
    cols = ["round", "experiment", "look", "n_seeds", "continue", "next_norms", "claim_id",
            "row_experiment",
            "norm", "verdict", "adjusted_verdict", "interval_level"]
    df = pd.DataFrame(rows, columns=cols).sort_values(["experiment", "round", "claim_id",
                                                       "row_experiment", "norm"],
                                                      kind="stable", ignore_index=True)
    io.write_table(df, out, io.provenance(io.stable_hash(records), "cpu", torch_free=True,
                                          rounds=len(paths)))
    return df
