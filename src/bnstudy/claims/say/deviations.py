"""Where a ledger row's experiment departs from its claim's paper protocol, from the config.

:func:`deviations` compares one experiment's setup (its dataset kind and options, model,
training and measure options: :func:`setups` builds them from a flat study config) with a
:class:`bnstudy.claims.declare.protocols.Protocol` and returns the concrete differences, e.g. ``lr
0.001 vs the paper's 0.01 (1e-6 on the summed squared error ...)`` or ``1000 of 10,000
steps``. :func:`add_columns` writes them into the ledger (``deviations``, joined by ``; ``;
``protocol``, the paper's setting in words) for every measured row. Nothing here is written by
hand per row: a new experiment or config value changes the text by itself.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from bnstudy.claims.declare.protocols import Protocol, pick
from bnstudy.networks.norms.population_options import POPULATION_OPTIONS

if TYPE_CHECKING:  # the plan imports setups() when the Snakefile is read: no pandas there
    import pandas as pd

NONE = "none: the paper's setting"
SETUP_MEASURES = ("smoothness",)  # measure sections whose options a protocol compares
SEP = "; "


def setups(config: dict) -> dict[str, dict]:
    """``{experiment: {"dataset": {kind, options}, "model", "training", "measures", "norms"}}``
    of a flat (checked, expanded) study config, JSON-able: what :func:`deviations` compares."""
    out = {}
    for name, e in config.get("experiments", {}).items():
        ds = config["datasets"][e["dataset"]]
        out[name] = {"dataset": {"kind": ds["kind"], "options": dict(ds.get("options", {}))},
                     "model": dict(config["models"][e["model"]]),
                     "training": dict(config["trainings"][e["training"]]),
                     # the one measure option a protocol compares: smoothness's probe range
                     "measures": {m: config[m] for m in SETUP_MEASURES
                                  if m in config and m in e.get("measures", [m])},
                     "norms": list(e["norms"])}
        aliases = {n: own["claims_as"] for n, own in (config.get("normalizers") or {}).items()
                   if n in e["norms"] and own.get("claims_as")}
        if aliases:  # a user's normalizer read with a built-in's claims (only where declared)
            out[name]["claims_as"] = aliases
    return out


def _data_text(kind: str, opts: dict) -> str:
    n = opts.get("n_train", opts.get("N"))
    size = {"digits": "8x8 digits", "gaussian_linear": f"{opts.get('dim', '?')}-D Gaussian",
            "teacher_student": f"N = {opts.get('N', '?')}, alpha = {opts.get('alpha', '?')}"}
    text = size.get(kind, kind)
    if kind == "star2d" and n is not None:
        text = f"{n} points of a 2-D star"
    return text


def _model_text(m: dict) -> str:
    arch = m.get("arch") or (f"a user's model ({m['from']})" if m.get("from") else "?")
    bits = [f"depth {m['depth']}" if "depth" in m else "", f"width {m['width']}"
            if "width" in m else ""]
    bits = [b for b in bits if b]
    return f"{arch}" + (f" ({', '.join(bits)})" if bits else "")


def _differs(a, b) -> bool:
    try:
        return not math.isclose(float(a), float(b), rel_tol=1e-6, abs_tol=0.0)
    except (TypeError, ValueError):
        return a != b


def _probe_range(setup: dict) -> tuple[float, float] | None:
    opts = setup.get("measures", {}).get("smoothness")
    if not opts:
        return None
    arch = setup["model"].get("arch")
    m = (opts.get("multipliers_by_arch") or {}).get(arch, opts.get("multipliers"))
    return (float(min(m)), float(max(m))) if m else None


def _population(p: Protocol, setup: dict, norm: str) -> list[str]:
    """Where a population_norm row's statistics come from, against the paper's sample count
    (Luo §5: 10k training samples; how often they are re-estimated, the paper does not say)."""
    if p.population is None or norm != "population_norm":
        return []
    own = (setup["model"].get("norm_options") or {}).get("population_norm") or {}
    o = {**POPULATION_OPTIONS, **own}
    k = int(o["refresh_every"])
    every = "before every step" if k == 1 else f"every {k} steps"
    return [f"PN's population statistics and gamma decay from {int(o['n_samples']):,} training "
            f"inputs, re-estimated {every}, vs the paper's {p.population:,} samples"]


def deviations(p: Protocol, setup: dict, table: str = "", norm: str = "") -> list[str]:
    """The concrete differences between an experiment's ``setup`` and protocol ``p``; a
    claim measured on ``table`` ``smoothness`` also compares the probe range, and a row of
    ``norm`` population_norm where its statistics come from."""
    out = []
    kind, opts = setup["dataset"]["kind"], setup["dataset"].get("options", {})
    if p.data and kind not in p.data:
        out.append(f"{_data_text(kind, opts)}, not {p.data_text}")
    elif p.n_train is not None and "n_train" in opts and _differs(opts["n_train"], p.n_train):
        out.append(f"{opts['n_train']} training points, not {p.n_train}")
    if not p.data or kind in p.data:
        out.extend(f"{k} = {opts[k]:g} vs the paper's {v:g}" for k, v in p.data_options
                   if k in opts and _differs(opts[k], v))
    model = setup["model"]
    if p.arch and model.get("arch") not in p.arch:
        out.append(f"{_model_text(model)}, not {p.model_text}")
    else:
        for key in ("depth", "width"):
            want = getattr(p, key)
            if want is not None and key in model and _differs(model[key], want):
                out.append(f"{key} {model[key]} vs the paper's {want}")
    t = setup["training"]
    if p.lr is not None and "lr" in t and _differs(t["lr"], p.lr):
        out.append(f"lr {t['lr']:g} vs the paper's {p.lr:g}"
                   + (f" ({p.lr_paper})" if p.lr_paper else ""))
    if p.momentum is not None and _differs(t.get("momentum", 0.0), p.momentum):
        out.append(f"momentum {t.get('momentum', 0.0):g} vs the paper's {p.momentum:g}")
    if p.batch_size is not None and "batch_size" in t and t["batch_size"] != p.batch_size:
        out.append(f"batch {t['batch_size']} vs the paper's {p.batch_size}")
    if p.steps is not None and "steps" in t and int(t["steps"]) != p.steps:
        out.append(f"{int(t['steps']):,} of the paper's {p.steps:,} steps")
    probes = _probe_range(setup) if table == "smoothness" else None
    if p.probes is not None and probes is not None and any(
            _differs(a, b) for a, b in zip(probes, p.probes, strict=True)):
        out.append(f"probes [{probes[0]:g}, {probes[1]:g}] x lr vs the paper's "
                   f"[{p.probes[0]:g}, {p.probes[1]:g}]")
    cps = t.get("checkpoints")
    if "every training step" in p.where and cps:
        out.append(f"measured at steps {', '.join(map(str, cps))} and the last, not every step")
    return out + _population(p, setup, norm)


def _row_setups(row, setups_: dict, kinds: set[str]) -> list[dict]:
    """The setups a row's runs come from: its experiment (and a contrast's other one), or,
    for a row pooled under a name of its own, every experiment on the claim's data kinds
    (``kinds``) that runs its normalizer."""
    names = [str(row.get("experiment", ""))]
    base = str(row.get("baseline", ""))
    if base in setups_:
        names.append(base)
    found = [setups_[n] for n in names if n in setups_]
    if found:
        return found
    norm = str(row.get("norm", ""))
    return [s for s in setups_.values() if norm in s.get("norms", ())
            and s["dataset"]["kind"] in kinds]


def add_columns(ledger: pd.DataFrame, protocols: dict[str, tuple[Protocol, ...]],
                tables: dict[str, str], setups_: dict | None) -> pd.DataFrame:
    """``ledger`` with ``protocol`` and ``deviations`` for each row whose claim declares a
    protocol and whose experiment's setup is known (``setups_``; without it, e.g. in a
    replication round, both are empty)."""
    out = ledger.copy()
    proto, devs = [], []
    for _, r in out.iterrows():
        ps = protocols.get(r["claim_id"], ())
        measured = bool(ps) and r.get("verdict") != "not measured"
        kinds = {k for p in ps for k in p.data}
        found = _row_setups(r, setups_ or {}, kinds) if measured else []
        if measured and not any(p.data for p in ps):  # an exact computation of the example
            proto.append(ps[0].describe())
            devs.append(NONE + f" ({ps[0].where})" if ps[0].where else NONE)
            continue
        if not found:
            proto.append(ps[0].describe() if ps else "")
            devs.append("")
            continue
        s0 = found[0]
        p = pick(ps, s0["model"].get("arch"), s0["dataset"]["kind"])
        seen: list[str] = []
        for s in found:
            seen.extend(d for d in deviations(p, s, tables.get(r["claim_id"], ""),
                                              str(r.get("norm", ""))) if d not in seen)
        proto.append(p.describe())
        devs.append(SEP.join(seen) or NONE)
    out["protocol"] = proto
    out["deviations"] = devs
    return out
