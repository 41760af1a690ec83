"""Teacher-student figures (Luo et al. §4): generalization error against the load alpha with the
closed forms overlaid, the batch-size effect on gamma^2 and the generalization error, and the
learning curves that say how long training must run. All three are study-wide figures; the
report section and its findings are in :mod:`bnstudy.plots.teacher_student_findings`."""

from __future__ import annotations

import numpy as np
import pandas as pd

from bnstudy import lazy
from bnstudy.plots import Family, figure, finish, label, message, register, seed_ci, step_axis
from bnstudy.plots.colors import arm_palette
from bnstudy.tables.intervals import mean_ci
from bnstudy.theory import luo as lt

# imported on first use (bnstudy.lazy): importing this module stays cheap
plt = lazy.module("matplotlib.pyplot")
sns = lazy.module("seaborn")

CRITICAL = {"linear": 1.0, "relu": 2.0}  # where the vanilla closed form diverges
PANEL = ["activation", "S", "N"]


def single_unit_rows(df: pd.DataFrame) -> pd.DataFrame:
    """Rows of single-unit students, with ``arm`` (normalizer and batch) and ``err``."""
    if df.empty or "alpha" not in df:
        return df.iloc[0:0]
    df = df[df["activation"].notna()].copy()
    full = df["batch_size"] >= df["P"]
    df["arm"] = np.where(full, df["norm"] + " (full batch)",
                         df["norm"] + " (M=" + df["batch_size"].astype(str) + ")")
    df["err"] = df["gen_error"].fillna(df["test_mse"])
    return df


def last_rows(df: pd.DataFrame) -> pd.DataFrame:
    if df.empty:
        return df
    last = df.groupby(["experiment", "norm", "seed"])["step"].transform("max")
    return df[df["step"] == last]


def main_arms(last: pd.DataFrame) -> list[str]:
    """Arms measured at two or more loads (a batch-size sweep's single-load arms are left out)."""
    n = last.groupby("arm")["alpha"].nunique()
    arms = list(n[n >= 2].index) or list(n.index)
    return sorted(arms, key=lambda a: (not a.startswith("none"), a))


def sweeps(last: pd.DataFrame) -> list[tuple]:
    """(norm, alpha, activation, S, N) groups trained at two or more mini-batch sizes."""
    mb = last[last["batch_size"] < last["P"]]
    n = mb.groupby(["norm", "alpha", *PANEL])["batch_size"].nunique()
    return list(n[n >= 2].index)


def batch_swept(config: dict) -> bool:
    """Whether one normalizer and model is trained at two or more mini-batch sizes on
    teacher-student data of one load, N and S (the batch-size figure's sweep)."""
    sizes: dict[tuple, set] = {}
    for e in config["experiments"].values():
        d = config["datasets"][e["dataset"]]
        bsz = config["trainings"][e["training"]].get("batch_size")
        if d["kind"] != "teacher_student" or not isinstance(bsz, int):
            continue
        o = d.get("options", {})
        for norm in e["norms"]:
            key = (norm, e["model"], o.get("alpha"), o.get("N"), o.get("S"))
            sizes.setdefault(key, set()).add(bsz)
    return any(len(v) > 1 for v in sizes.values())


def _empty(what: str) -> plt.Figure:
    return message(what)


def _stats(g: pd.DataFrame, by: str, col: str) -> pd.DataFrame:
    rows = [(k, *mean_ci(v[col])) for k, v in g.groupby(by)]
    return pd.DataFrame(rows, columns=[by, "mean", "lo", "hi", "n"])


def _errorbar(ax, st: pd.DataFrame, x: str, color, label: str, dx: float = 0.0, log=False):
    lo = (st["mean"] - st["lo"]).fillna(0).clip(lower=0)
    hi = (st["hi"] - st["mean"]).fillna(0).clip(lower=0)
    xs = st[x] * (2 ** dx) if log else st[x] + dx
    ax.errorbar(xs, st["mean"], yerr=[lo, hi], fmt="o", ms=5, capsize=3, color=color,
                label=label)


def zeta_of(g: pd.DataFrame) -> float | None:
    z = g["zeta"].dropna().round(12).unique()
    return float(z[0]) if len(z) == 1 and z[0] > 0 else None


def draw_alpha(frames, options):
    last = last_rows(single_unit_rows(frames[0]))
    if last.empty:
        return _empty("no teacher-student runs (single-unit students) in this study")
    arms = main_arms(last)
    last = last[last["arm"].isin(arms)]
    panels = sorted(last.groupby(PANEL).groups)
    colors = arm_palette(arms)  # each arm in its normalizer's colour, as in every figure
    fig, axes = figure(len(panels), 1, height=5.0)
    for ax, (act, noise, n) in zip(axes[:, 0], panels, strict=True):
        p = last[(last["activation"] == act) & (last["S"] == noise) & (last["N"] == n)]
        lo_a, hi_a = float(p["alpha"].min()), float(p["alpha"].max())
        grid = np.linspace(max(0.02, 0.5 * lo_a), hi_a + 0.25 * (hi_a - lo_a + 1), 600)
        with np.errstate(all="ignore"):
            ax.plot(grid, lt.eps_sgd(grid, noise, act), color="black", lw=1.6,
                    label="closed form: vanilla SGD")
            if act == "relu":
                ax.plot(grid, np.where(grid < 2, 1 - grid / 4, np.nan), color="grey", lw=1,
                        label="vanilla SGD, noise-free teacher (lower bound)")
        present = [a for a in arms if a in set(p["arm"])]
        curves: dict[tuple, list[str]] = {}  # (kind, zeta, convention) -> arms, one line each
        for arm in present:
            g = p[p["arm"] == arm]
            z, conv = zeta_of(g), str(g["convention"].iloc[0])
            if z is not None and act == "linear" and conv in lt.CONVENTIONS:  # a ridge arm
                curves.setdefault(("WN + gamma decay", z, conv), []).append(arm)
            elif z is not None and act == "linear" and g["zeta_main"].notna().any():
                zm = float(g["zeta_main"].dropna().iloc[0])  # BN: the curve Fig. 1a prints
                curves.setdefault(("WN + gamma decay", zm, "paper"), []).append(arm)
                if g["theory_shrinkage"].notna().any():
                    curves.setdefault(("shrinkage mean field", z, ""), []).append(arm)
        for (kind, z, conv), who in curves.items():
            with np.errstate(all="ignore"):
                y = (lt.eps_wn_linear(grid, noise, z, conv) if kind.startswith("WN")
                     else lt.eps_shrinkage_linear(grid, noise, z))
            lam = {"paper": ", lam=zeta", "loss": ", lam=alpha zeta"}.get(conv, "")
            ax.plot(grid, y, color=colors[who[0]], ls="--" if kind.startswith("WN") else ":",
                    lw=1.3, label=f"{kind}, zeta={z:.3g}{lam} ({', '.join(who)})")
        for k, arm in enumerate(present):
            g = p[p["arm"] == arm]
            st = _stats(g, "alpha", "err")
            _errorbar(ax, st, "alpha", colors[arm], f"{arm}: measured ({len(g)} runs)",
                      dx=0.004 * (k - (len(present) - 1) / 2) * (hi_a - lo_a + 1))
        ax.axvline(CRITICAL[act], color="grey", lw=0.8, ls=":")
        finite = p["err"][np.isfinite(p["err"])]
        top = max(float(finite.max()) if len(finite) else 1.0, 1.2)
        bottom = min(float(finite.min()) if len(finite) else 0.1,
                     float(np.nanmin(lt.eps_sgd(grid, noise, act))))
        ax.set_yscale("log")
        ax.set_ylim(0.7 * bottom, 1.6 * top)
        ax.set_xlabel(label("alpha"))
        ax.set_ylabel("generalization error (noise-free teacher)")
        ax.set_title(f"{act} student, N = {n}, S = {noise:g}")
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.suptitle("Luo §4 teacher-student: generalization error vs load")
    return finish(fig)


def draw_batch(frames, options):
    last = last_rows(single_unit_rows(frames[0]))
    groups = sweeps(last) if not last.empty else []
    if not groups:
        return _empty("no batch-size sweep in this study (one normalizer and load trained at "
                      "two or more mini-batch sizes)")
    fig, axes = figure(1, 2, height=4.2)
    axes = axes[0]
    colors = arm_palette(groups, norm_of=lambda grp: grp[0]).values()
    for color, (norm, alpha, act, noise, n) in zip(colors, groups, strict=True):
        g = last[(last["norm"] == norm) & (last["alpha"] == alpha) & (last["activation"] == act)
                 & (last["S"] == noise) & (last["N"] == n) & (last["batch_size"] < last["P"])]
        arm = f"{norm}, alpha={alpha:g}, N={n}"
        ms = np.array(sorted(g["batch_size"].unique()))
        zetas = g.groupby("batch_size")["zeta"].first().reindex(ms).to_numpy()
        conv, zw = str(g["convention"].iloc[0]), zetas
        if conv not in lt.CONVENTIONS:  # BN arms (shrinkage): the ridge Luo Fig. 1a prints
            conv = "paper"
            zw = g.groupby("batch_size")["zeta_main"].first().reindex(ms).to_numpy()
        for ax, col, k in ((axes[0], "gamma2", 0), (axes[1], "err", None)):
            _errorbar(ax, _stats(g, "batch_size", col), "batch_size", color,
                      f"{arm}: measured", log=True)
            if act != "linear" or not np.all(np.isfinite(zetas)):
                continue
            if k == 0:
                wn = [lt.order_parameters_wn_linear(alpha, noise, z, conv)[0] for z in zw]
                sh = [lt.order_parameters_shrinkage_linear(alpha, noise, z)[0] for z in zetas]
            else:
                wn = [lt.eps_wn_linear(alpha, noise, z, conv) for z in zw]
                sh = [lt.eps_shrinkage_linear(alpha, noise, z) for z in zetas]
            ax.plot(ms, wn, color=color, ls="--", label="WN + gamma decay at zeta(M)")
            ax.plot(ms, sh, color=color, ls=":", label="shrinkage mean field at zeta(M)")
    for ax, col in zip(axes, ("gamma2", "err"), strict=True):
        ax.set_xscale("log", base=2)
        ax.set_xlabel(label("batch_size"))
        ax.set_ylabel(label(col))
    # the same lines in both panels
    axes[-1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.suptitle("Batch size: BN's regularization weakens as M grows (Luo §2, Fig. 2e-f)")
    return finish(fig)


def draw_curves(frames, options):
    df = single_unit_rows(frames[0])
    if df.empty:
        return _empty("no teacher-student runs (single-unit students) in this study")
    arms = main_arms(last_rows(df))
    df = df[df["arm"].isin(arms)]
    alphas = sorted(df["alpha"].unique())
    fig, axes = figure(1, len(alphas), height=3.8, sharey=True)
    for j, (ax, alpha) in enumerate(zip(axes[0], alphas, strict=True)):
        g = df[df["alpha"] == alpha]
        sns.lineplot(g, x="epochs", y="err", hue="arm", hue_order=[a for a in arms
                     if a in set(g["arm"])], palette=arm_palette(arms), marker="o",
                     errorbar=seed_ci, ax=ax,
                     legend=(j == len(alphas) - 1))
        th = g["theory_sgd"].dropna()
        if len(th) and np.isfinite(th.iloc[0]):
            ax.axhline(float(th.iloc[0]), color="black", lw=1, ls="--")
        step_axis(ax, g["epochs"].unique(), what=label("epochs"))
        ax.set_yscale("log")
        ax.set_title(f"alpha = {alpha:g}")
        if j == len(alphas) - 1:
            ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0))
        ax.set_ylabel(label("err"))
    fig.suptitle("Teacher-student learning curves (dashed: vanilla closed form)")
    return finish(fig)


register(Family(
    "teacher_student_alpha", draw_alpha, tables=("teacher_student",),
    module="teacher_student", scope="study", caption=(
        "Luo Fig. 1: generalization error (exact, against the noise-free teacher) vs the load "
        "alpha = P/N at each run's last checkpoint; dots are means with 95% Student-t CIs over "
        "all runs "
        "at that load (run seeds and data draws pooled), per normalizer and batch size. Lines: "
        "the closed forms of Luo §4 (solid: vanilla SGD; dashed: WN + gamma decay with the "
        "ridge lam the legend names: lam = alpha zeta for the explicit gamma-decay arm, the "
        "objective it trains, and for BN arms the curve Luo's Fig. 1a prints, 1/(2M) with lam "
        "= zeta; dotted: least squares shrunk by 1/(1 + zeta), the objective of BN's gamma "
        "decay on its output variance over the training set, BN's primary curve). The vertical "
        "line marks where "
        "vanilla SGD's closed form diverges."),
))
register(Family(
    "teacher_student_batch_size", draw_batch, tables=("teacher_student",),
    module="teacher_student", scope="study", in_study=batch_swept, caption=(
        "Batch-size sweep at one load: the student's gamma^2 = ||w~||^2/N (left) and its "
        "generalization error (right) vs the batch size M, means with 95% Student-t CIs over "
        "runs, with "
        "the WN + gamma decay closed forms at zeta(M) (dashed) and the shrinkage mean field "
        "(dotted). Luo's claim: smaller batches regularize more (smaller gamma^2)."),
))
register(Family(
    "teacher_student_curves", draw_curves, tables=("teacher_student",),
    module="teacher_student", scope="study", caption=(
        "Generalization error over training (epochs, symmetric-log) at each load, per arm, "
        "mean and 95% Student-t CI over runs; dashed: the vanilla closed form. Read off how "
        "long training "
        "must run for the measured error to settle."),
))
