"""What the study ran, said first: its runs and seeds per arm, each experiment's setting, how
that differs from each paper's protocol, and what the paper-scale configs would run.

A reader who sees 'contradicted' next to a paper's claim must first know that the study
trained, say, a 2-D star MLP for 600 steps where the paper trained VGG on CIFAR-10 for 15k.
Everything here comes from the study's tables and config and from the claims ledger:

- runs and seeds per arm: the (experiment, normalizer, seed) runs that exist in the training
  (or generalization) table, never the config's norms times its seeds (a replicated experiment
  adds seeds to some arms only); an experiment with no rows shows its declared seeds as planned;
- each experiment's setting: dataset kind and size, model, steps, learning rate and batch;
- deviations: the ledger's ``deviations`` column (the concrete differences between a row's
  experiment and the paper's protocol, ``'; '``-separated) and ``protocol`` (the paper's
  setting), where the ledger has them; a study with a measured row that has deviations is
  said to be at **reduced scale**;
- the paper-scale configs (``config/studies/*_paper.yaml``): the first lines of their header
  and the totals of their generated cost block (:mod:`bnstudy.planning.cost`).
"""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

from bnstudy.planning import cost as study_cost

RUN_KEYS = ("experiment", "norm", "seed")
RUN_TABLES = ("training", "generalization")  # the tables that hold a row per trained run


def _text(x) -> str:
    return "" if x is None or (not isinstance(x, str) and pd.isna(x)) else str(x)


def arms(config: dict, frames: dict[str, pd.DataFrame]) -> dict[str, dict[str, int]]:
    """``{experiment: {norm: seeds that ran}}`` from the runs in the tables (an experiment with
    none: its declared norms and seeds, as planned), experiments in config order."""
    found = [f[list(RUN_KEYS)] for t in RUN_TABLES if (f := frames.get(t)) is not None
             and not f.empty and set(RUN_KEYS) <= set(f.columns)]
    runs = (pd.concat(found).drop_duplicates() if found
            else pd.DataFrame(columns=list(RUN_KEYS)))
    out = {}
    for name, e in config.get("experiments", {}).items():
        ran = runs[runs["experiment"] == name]
        if ran.empty:
            out[name] = {n: len(e.get("seeds", [])) for n in e.get("norms", [])}
        else:
            counts = ran.groupby("norm")["seed"].nunique()
            order = [n for n in e.get("norms", []) if n in counts.index]
            order += sorted(set(counts.index) - set(order))
            out[name] = {n: int(counts[n]) for n in order}
    return out


def ran(config: dict, frames: dict[str, pd.DataFrame]) -> set[str]:
    """The experiments with runs in the tables (the others are only planned)."""
    have = set()
    for t in RUN_TABLES:
        f = frames.get(t)
        if f is not None and not f.empty and "experiment" in f:
            have |= {str(e) for e in f["experiment"].unique()}
    return have & set(config.get("experiments", {}))


def seeds_text(per_norm: dict[str, int]) -> str:
    """'none 12, batchnorm 12, layernorm 3 seeds' ('3 seeds each' when all arms agree)."""
    if not per_norm:
        return "no runs"
    counts = set(per_norm.values())
    if len(counts) == 1:
        n = counts.pop()
        each = " each" if len(per_norm) > 1 else ""
        return f"{', '.join(per_norm)}: {n} seed{'s' if n != 1 else ''}{each}"
    return ", ".join(f"{k} {v}" for k, v in per_norm.items()) + " seeds"


def _opts(d: dict, keys: tuple[str, ...]) -> str:
    return ", ".join(f"{k} {d[k]}" for k in keys if k in d)


def setting(config: dict, name: str) -> str:
    """One experiment's setting in a few words: data, model, training."""
    e = config["experiments"][name]
    ds = config.get("datasets", {}).get(e["dataset"], {})
    opts = ds.get("options", {}) or {}
    data = ds.get("kind", e["dataset"])
    size = _opts(opts, ("n_train", "N", "alpha", "dim"))
    model = config.get("models", {}).get(e["model"], {})
    arch = model.get("arch", e["model"])
    shape = _opts(model, ("depth", "width"))
    tr = config.get("trainings", {}).get(e.get("training", ""), {})
    steps = f"{tr['steps']} steps" if "steps" in tr else "its training"
    how = _opts(tr, ("lr", "batch_size"))
    return (f"{data}{f' ({size})' if size else ''}; {arch}{f' ({shape})' if shape else ''}; "
            f"{steps}{f' ({how})' if how else ''}")


def deviations(ledger: pd.DataFrame | None) -> dict[str, list[str]]:
    """``{experiment: [deviation, ...]}`` over the measured rows that state deviations (each
    deviation once, in ledger order); empty when the ledger has no ``deviations`` column."""
    if ledger is None or "deviations" not in ledger:
        return {}
    out: dict[str, list[str]] = {}
    measured = ledger[ledger["verdict"] != "not measured"]
    for _, r in measured.iterrows():
        for part in _text(r["deviations"]).split(";"):
            part = part.strip()
            exp = _text(r.get("experiment")) or "study"
            if part and part not in out.setdefault(exp, []):
                out[exp].append(part)
    return {k: v for k, v in out.items() if v}


def protocols(ledger: pd.DataFrame | None) -> dict[str, str]:
    """``{paper: its protocol in a few words}`` where the ledger has a ``protocol`` column."""
    if ledger is None or "protocol" not in ledger or "paper" not in ledger:
        return {}
    out: dict[str, list[str]] = {}
    for _, r in ledger.iterrows():
        p, text = _text(r.get("paper")), _text(r.get("protocol"))
        if p and text and text not in out.setdefault(p, []):
            out[p].append(text)
    return {p: "; ".join(v) for p, v in out.items() if v}


_TOTAL = re.compile(r"^#\s+total\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s*$")


def paper_config(path: str | Path) -> dict:
    """A paper-scale config's header: the first sentence of its first comment paragraph (up to
    the command line or a blank comment line) and its cost block's totals (``jobs``,
    ``gpu_hours``, ``cpu_hours``; absent without a generated block)."""
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    about = []
    for line in lines:
        if not line.startswith("#") or line.strip() in ("#", "") or line.startswith("#   "):
            break
        about.append(line[1:].strip())
    first = re.split(r"(?<=\.)\s+(?=[A-Z])", " ".join(about), maxsplit=1)[0]
    out = {"file": f"config/studies/{Path(path).name}", "about": first}
    inside = False
    for line in lines:
        inside = inside or line.startswith(study_cost.BEGIN)
        if line.startswith(study_cost.END):
            break
        m = _TOTAL.match(line) if inside else None
        if m:
            out.update(jobs=int(m[1]), gpu_hours=float(m[3]), cpu_hours=float(m[4]))
    return out


def paper_scale_text(info: dict) -> str:
    cost = (f": {info['jobs']} jobs, about {info['gpu_hours']:.3g} GPU-hours and "
            f"{info['cpu_hours']:.3g} CPU-hours (estimated from FLOP counts, study_cost)"
            if "gpu_hours" in info else "")
    return f"{info['file']}{cost}. {info['about']}".strip()


def context(config: dict, frames: dict[str, pd.DataFrame], ledger: pd.DataFrame | None,
            paper_configs: list[str]) -> dict:
    """The template's opening summary: ``runs`` (that exist), ``diverged``, ``experiments``
    (name, setting, seeds per arm, deviations, planned), ``reduced`` (any measured row with
    deviations), ``protocols`` and ``paper_scale`` (one line per paper-scale config)."""
    per_arm = arms(config, frames)
    have = ran(config, frames)
    devs = deviations(ledger)
    exps = [{"name": n, "setting": setting(config, n), "seeds": seeds_text(per_arm[n]),
             "deviations": devs.get(n, []), "planned": n not in have}
            for n in config.get("experiments", {})]
    runs = sum(sum(per_arm[n].values()) for n in per_arm if n in have)
    train = frames.get("training")
    diverged = 0
    if train is not None and not train.empty and "diverged" in train:
        diverged = int(train.groupby(list(RUN_KEYS))["diverged"].any().sum())
    return {"runs": runs, "diverged": diverged, "experiments": exps,
            "reduced": bool(devs), "study_deviations": devs.get("study", []),
            "protocols": protocols(ledger),
            "paper_scale": [paper_scale_text(paper_config(p))
                            for p in relevant(paper_configs, ledger)]}


def relevant(paper_configs: list[str], ledger: pd.DataFrame | None) -> list[str]:
    """The paper-scale configs of the papers the ledger tests: ``<name>_paper.yaml`` where a
    ledger row's ``paper`` starts with ``<name>`` (case-insensitive; all of them without a
    ledger)."""
    if ledger is None or "paper" not in ledger:
        return sorted(paper_configs)
    papers = {_text(p).lower() for p in ledger["paper"].unique()}
    return sorted(p for p in paper_configs
                  if any(x.startswith(Path(p).name.split("_paper")[0].lower()) for x in papers))
