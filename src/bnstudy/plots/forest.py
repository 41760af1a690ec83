"""The answer against the papers (study scope): a forest plot of the study's paper tests.

One row per measured paper test of the claims ledger (``tables/claims.parquet``), grouped by
claim (one panel each, on the claim's own scale: the ledger's effect, a log ratio, points or a
relative deviation): the rule's estimate and interval (:mod:`bnstudy.claims.decide.robust`),
coloured by the row's adjusted outcome (:mod:`bnstudy.claims.decide.outcomes`), with 0, the claim's
margin (dotted) and the paper's own effect where it gives one (a black diamond) marked, and the
row's seeds beside it. Drawn from the ledger alone.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from bnstudy import lazy
from bnstudy.claims.decide import outcomes as O
from bnstudy.plots import Family, Section, figure, finish, message, register, register_section

plt = lazy.module("matplotlib.pyplot")

COLORS = {O.SUPPORTED: "#2e7d32", O.CONTRADICTED: "#c62828", O.ABSENT: "#1565c0",
          O.UNDECIDED: "#9e9e9e"}


def paper_tests(ledger: pd.DataFrame) -> pd.DataFrame:
    """The measured paper tests with a finite estimate, in ledger order, with ``outcome``."""
    role = ledger["role"] if "role" in ledger else pd.Series("test", index=ledger.index)
    d = ledger[(role == "test") & (ledger["verdict"] != O.NOT_MEASURED)].copy()
    for c in ("effect", "ci_low", "ci_high"):
        d[c] = pd.to_numeric(d.get(c), errors="coerce")
    d = d[np.isfinite(d["effect"])]
    adjusted = d["adjusted_verdict"] if "adjusted_verdict" in d else d["verdict"]
    d["outcome"] = [O.outcome(a if isinstance(a, str) else v)
                    for a, v in zip(adjusted, d["verdict"], strict=True)]
    return d


def _label(r) -> str:
    where = ": ".join(str(x) for x in (r.get("experiment"), r.get("norm")) if isinstance(x, str))
    base = r.get("baseline")
    return where + (f" vs {base}" if isinstance(base, str) and base else "")


def _margins(r) -> list[float]:
    m = float(r.get("margin", 0.0) or 0.0)
    if not m > 0:
        return []
    rule = str(r.get("rule", ""))
    if "inside ±" in rule:  # equivalent
        return [-m, m]
    if "lies above -" in rule or "lies below 0; contradicted" in rule:  # no_less, less
        return [-m]
    return [m]


def draw(frames, options):
    d = paper_tests(frames[0])
    if d.empty:
        return message("no measured paper test in this study's ledger", "Paper tests")
    claims = list(dict.fromkeys(d["claim_id"]))
    sizes = [int((d["claim_id"] == c).sum()) for c in claims]
    fig, axes = figure(len(claims), 1, height=0.2, gridspec_kw={"height_ratios": sizes})
    fig.set_figheight(max(2.5, 0.32 * sum(sizes) + 0.55 * len(claims) + 0.8))
    for ax, cid in zip(axes[:, 0], claims, strict=True):
        g = d[d["claim_id"] == cid].reset_index(drop=True)
        y = np.arange(len(g))[::-1]
        for yi, (_, r) in zip(y, g.iterrows(), strict=True):
            color = COLORS.get(r["outcome"], "#9e9e9e")
            lo, hi = r["ci_low"], r["ci_high"]
            if np.isfinite(lo) and np.isfinite(hi):
                ax.plot([lo, hi], [yi, yi], color=color, lw=2.2, solid_capstyle="butt")
            ax.plot([r["effect"]], [yi], "o", color=color, ms=5)
            for m in _margins(r):
                ax.plot([m], [yi], "|", color="black", ms=12, mew=1.2)
            pe = r.get("paper_effect")
            if pe is not None and pd.notna(pe):
                ax.plot([pe], [yi], "D", color="black", ms=5, fillstyle="none")
            n = r.get("n_seeds")
            ax.annotate(f"n={int(n)}" if pd.notna(n) else "", (1.01, yi),
                        xycoords=("axes fraction", "data"), va="center", fontsize=7)
        ax.axvline(0.0, color="black", lw=0.8)
        ax.set_yticks(y, [_label(r) for _, r in g.iterrows()], fontsize=7)
        ax.set_ylim(-0.7, len(g) - 0.3)
        scale = "log ratio" if str(g["quantity"].iloc[0]).startswith("log") else "effect"
        ax.set_title(f"{cid} ({g['paper'].iloc[0]}): {scale}", fontsize=8, loc="left")
        ax.tick_params(axis="x", labelsize=7)
    handles = [plt.Line2D([], [], color=c, lw=2.2, marker="o", label=o) for o, c in COLORS.items()]
    handles += [plt.Line2D([], [], color="black", ls="", marker="|", ms=10, label="margin"),
                plt.Line2D([], [], color="black", ls="", marker="D", fillstyle="none",
                           label="the paper's effect")]
    fig.legend(handles=handles, loc="lower center", ncol=3, fontsize=7, frameon=False)
    fig.suptitle("Paper tests: the rule's estimate and interval, by claim (after Holm)")
    return finish(fig, rect=(0, 0.07, 0.95, 1))


register(Family(
    "forest", draw, tables=("claims",), module="forest", scope="study",
    caption=(
        "The study's paper tests, one row each, grouped by claim on the claim's own scale: "
        "the rule's estimate (Hodges-Lehmann) and interval (skew-corrected t and exact "
        "signed-rank, each at half the row's level, intersected), coloured by the adjusted "
        "outcome (supported, contradicted at this setting, absent at this setting, undecided); "
        "the vertical line is 0, the bars the claim's declared margin, the open diamond the "
        "paper's own effect where the paper gives one, n the paired seeds")))

register_section(Section(
    "forest", "The answer against the papers", (
        "Every paper test of the ledger at a glance: where its interval lies against 0 (the "
        "direction the paper claims), against the margin the claim declared before any data "
        "(smaller effects are absent at this setting), and against the paper's own number where "
        "it gives one."),
    "claims", ("forest",), rank=0))
