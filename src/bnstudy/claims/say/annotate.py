"""What a ledger row's numbers do not say by themselves: its role and the notes on its runs.

- Rows beyond the paper (role ``beyond the paper``): Santurkar et al.'s claims measured on a
  ResNet (their footnote 4 sets ResNets aside as a confounder; the paper makes no claim about
  them). A row is a ResNet's when the claim's table names the architecture (``arch``) as a
  ResNet, or else when its model key contains ``resnet``; and ``noisy_bn`` on a deep linear net
  (Santurkar et al. ran noisy BN on VGG / CIFAR-10 only). (Proposition 2's deeper-layer claims,
  the relative smoothness rows and Luo's corrected curve carry the role in the claim itself:
  :mod:`bnstudy.claims.ledger`.)
- A test row over fewer than two paired seeds (the dannemann study's one-seed figure runs)
  becomes a ``one-seed illustration``: it has no interval and tests nothing.
- Collapsed runs (:func:`collapsed`, from the ``training`` table): a run is at chance at a
  checkpoint when its training accuracy is at most ``c + CHANCE_SLACK (1 - c)``, ``c`` the
  median training accuracy at step 0 of the runs the row compares (untrained nets: chance for
  the data's class balance), and diverged from the first step with a non-finite loss (at an
  evaluation, or the training step at which it stopped). A run at chance at every checkpoint
  from some step to its last is reported from that step (step 0: it never left chance).
  Such runs are data: they stay in the row, and the row's note says how many of the compared
  arms' seeds are at chance (or diverged) from which step.
- Luo §5 rows: a learning-rate warm-up (the training table's ``lr`` rising over the first
  evaluation steps) is not in Luo et al.'s protocol, and the note says so; the rows that pair
  two experiments (batch size, dropout: ``CONFOUND_CLAIMS``) note whether the two ran different
  learning-rate paths (final lr and summed lr over the evaluation steps), a confound until a
  control arm with the same summed learning rate (within ``SUMMED_LR_MATCH``) separates what
  the contrast varies from the schedule; a row whose two experiments match in summed lr says it
  controls the confound.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

CHANCE_SLACK = 0.1
BEYOND = "beyond the paper"
ILLUSTRATION = "one-seed illustration"  # a figure's runs: no interval, no test
RUN = ["experiment", "norm", "seed"]
CONFOUND_CLAIMS = ("luo_gamma_batch", "luo_large_batch", "luo_dropout")
SUMMED_LR_MATCH = 0.1  # summed learning rates within 10% of each other: the schedule matched


def _train(training: pd.DataFrame | None) -> pd.DataFrame:
    if training is None or training.empty or "split" not in training:
        return pd.DataFrame(columns=[*RUN, "step", "loss", "accuracy", "lr"])
    return training[training["split"] == "train"].sort_values([*RUN, "step"])


def collapsed(training: pd.DataFrame | None, experiment: str,
              norms: list[str]) -> pd.DataFrame:
    """One row per run of ``norms`` in ``experiment`` at chance or diverged from some step on:
    norm, seed, ``from_step``, ``kind`` (``at chance`` / ``diverged``), ``threshold`` (the
    accuracy at or below which a checkpoint is at chance, from these runs' step 0) and
    ``runs`` (how many runs of that normalizer the table has)."""
    d = _train(training)
    g = d[(d["experiment"] == experiment) & d["norm"].isin(norms)]
    start = g[g["step"] == g["step"].min()]["accuracy"] if len(g) else g["accuracy"]
    c = float(start.median()) if start.notna().any() else np.nan
    thr = c + CHANCE_SLACK * (1.0 - c)
    every = training if training is not None and "loss" in training else d  # any split
    every = every[(every["experiment"] == experiment) & every["norm"].isin(norms)]
    out = []
    for (norm, seed), run in g.groupby(["norm", "seed"]):
        acc = run["accuracy"].to_numpy(float)
        steps, runs = run["step"].to_numpy(), g.loc[g["norm"] == norm, "seed"].nunique()
        mine = every[(every["norm"] == norm) & (every["seed"] == seed)]
        bad = mine[~np.isfinite(mine["loss"].astype(float))]
        if len(bad):  # a non-finite loss at an evaluation or at the training step it stopped
            out.append((norm, seed, int(bad["step"].min()), "diverged", thr, runs))
            continue
        at = acc <= thr
        if not np.isfinite(thr) or not at[-1]:
            continue
        first = len(at) - int(np.argmin(at[::-1])) if not at.all() else 0
        out.append((norm, seed, int(steps[first]), "at chance", thr, runs))
    return pd.DataFrame(out, columns=["norm", "seed", "from_step", "kind", "threshold", "runs"])


def _collapse_note(training: pd.DataFrame, exps: list[str], norms: list[str]) -> str:
    parts = []
    for exp in exps:
        coll = collapsed(training, exp, norms)
        for (norm, kind), k in coll.groupby(["norm", "kind"], sort=False):
            steps = sorted(set(k["from_step"]))
            what = (f"at chance (train accuracy <= {k['threshold'].iloc[0]:.2g})"
                    if kind == "at chance" else "diverged (non-finite train loss)")
            parts.append(f"{len(k)} of {k['runs'].iloc[0]} {norm} seeds of {exp} {what} "
                         f"from step{'s' if len(steps) > 1 else ''} " + ", ".join(map(str, steps)))
    return "; ".join(parts)


def _lr_path(training: pd.DataFrame, exp: str, norm: str) -> pd.Series:
    """The median over seeds of the learning rate at each evaluation step."""
    d = _train(training)
    d = d[(d["experiment"] == exp) & (d["norm"] == norm)]
    return d.groupby("step")["lr"].median() if "lr" in d else pd.Series(dtype=float)


def _warmup_note(training: pd.DataFrame, exps: list[str], norm: str) -> str:
    parts = []
    for exp in exps:
        lr = _lr_path(training, exp, norm)
        rises = np.diff(lr.to_numpy()) > 0
        if len(rises) and rises[0]:
            peak = int(lr.index[int(np.argmin(rises)) if not rises.all() else -1])
            parts.append(f"{exp} warms its lr up (rising until about step {peak}), which is not "
                         "in Luo et al.'s protocol")
    return "; ".join(parts)


def _summed(lr: pd.Series) -> float:
    """The trapezoid sum of a learning-rate path over its evaluation steps."""
    v, s = lr.to_numpy(float), lr.index.to_numpy(float)
    return float(np.sum((v[1:] + v[:-1]) / 2 * np.diff(s)))


def _confound_note(training: pd.DataFrame, arm: str, base: str, norm: str) -> str:
    paths = {e: _lr_path(training, e, norm) for e in (arm, base)}
    if not all(len(p) > 1 for p in paths.values()):
        return ("confound, not controlled: the two experiments may follow different "
                "learning-rate paths under a per-step schedule (no training table to check)")
    (fa, sa), (fb, sb) = ((p.iloc[-1], _summed(p)) for p in paths.values())
    nums = (f"final lr {fa:.3g} at {arm} vs {fb:.3g} at {base}; summed lr about {sa:.3g} vs "
            f"{sb:.3g}, trapezoid over the evaluation steps")
    if abs(sa - sb) <= SUMMED_LR_MATCH * max(sa, sb):
        return f"summed lr matched ({nums}): this row controls the schedule confound"
    return (f"confound, not controlled: the two experiments follow different learning-rate "
            f"paths ({nums}), so the difference is not attributed to what the contrast varies "
            "alone; a control arm at the same summed lr separates the two")


def _is_resnet(table: pd.DataFrame | None, exp: str, model: str) -> bool:
    if table is not None and "arch" in table and "experiment" in table:
        arch = table.loc[table["experiment"] == exp, "arch"].dropna().astype(str)
        if not arch.empty:
            return arch.str.contains("resnet", case=False).any()
    return "resnet" in str(model).lower()


def annotate(ledger: pd.DataFrame, frames: dict[str, pd.DataFrame],
             tables: dict[str, str], contrasts: set[str]) -> pd.DataFrame:
    """``ledger`` with roles and notes as the module docstring states; ``tables`` maps a claim
    id to its table, ``contrasts`` names the claims whose baseline is another experiment."""
    out = ledger.copy()
    training = frames.get("training")
    for i, r in out.iterrows():
        exp = r.get("experiment")
        if not isinstance(exp, str) or not exp:
            continue
        cid, norm, base = r["claim_id"], str(r.get("norm")), r.get("baseline")
        notes = [r["note"]] if isinstance(r.get("note"), str) and r["note"] else []
        table = frames.get(tables.get(cid, ""))
        if r.get("paper") == "Santurkar et al." and _is_resnet(table, exp, r.get("model")):
            out.at[i, "role"] = BEYOND
            notes.append("Santurkar et al. set ResNets aside (footnote 4): beyond the paper")
        if cid == "noisy_bn" and "dln" in str(r.get("model")).lower():
            out.at[i, "role"] = BEYOND
            notes.append("Santurkar et al. ran noisy BN on VGG / CIFAR-10 only (Fig. 2): on "
                         "a deep linear net beyond the paper")
        n = r.get("n_seeds")
        if out.at[i, "role"] == "test" and n is not None and pd.notna(n) and n < 2:
            out.at[i, "role"] = ILLUSTRATION
            notes.append("one seed: a figure's runs, no interval, not a test of the paper")
        is_contrast = cid in contrasts
        exps = [exp, base] if is_contrast and isinstance(base, str) else [exp]
        norms = [norm] + ([base] if not is_contrast and isinstance(base, str) else [])
        if training is not None:
            notes.append(_collapse_note(training, exps, norms))
            if r.get("paper") == "Luo et al." and tables.get(cid) == "generalization":
                notes.append(_warmup_note(training, exps, norm))
        if cid in CONFOUND_CLAIMS and is_contrast and isinstance(base, str):
            notes.append(_confound_note(training, exp, base, norm))
        out.at[i, "note"] = "; ".join(n for n in notes if n)
    return out
