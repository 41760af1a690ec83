"""What each claim of the papers declares, before any data: its paper, words, table, per-run
quantity (:mod:`bnstudy.claims.values.metrics`, :mod:`bnstudy.claims.values.jitter`), the
normalizers it compares, its rule and margin with the margin's source (``paper: ...`` where the
paper gives a number, ``project: ...`` otherwise), the paper's own effect where it has one, and the
protocol its experiments are compared with (:mod:`bnstudy.claims.declare.protocols`).

:data:`CLAIMS` is the one list; :func:`bnstudy.claims.ledger.evaluate` reads it.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from bnstudy.claims.declare import protocols as P
from bnstudy.claims.declare.claim import Claim
from bnstudy.claims.declare.contrast import Contrast
from bnstudy.claims.values import jitter as cj
from bnstudy.claims.values import metrics as cm

__all__ = ["CLAIMS", "PROJECT_LOSS", "PROJECT_RATIO"]


def _pd_concentration(df: pd.DataFrame) -> pd.Series:
    """log(density near train points / density near random points), all layers, init."""
    d = df[(df["step"] == 0) & (df["layer"].astype(str) == "all")]
    if "applicable" in d:
        d = d[d["applicable"]]
    radius = np.sort(d["radius"].unique())[len(d["radius"].unique()) // 2] if len(d) else None
    d = d[d["radius"] == radius]
    keys = ["experiment", "dataset", "model", "norm", "seed"]
    wide = d.pivot_table(index=keys, columns="point_set", values="boundaries", aggfunc="mean")
    if not {"train", "random"} <= set(wide.columns):
        return pd.Series(dtype=float)
    return np.log((wide["train"] + 0.5) / (wide["random"] + 0.5))


LP = ("l1norm", "l2norm", "linfnorm")
TEST_LOSS = "log(test loss) at the last checkpoint (generalization table)"
# Luo §5's batch-size comparison, the batch sizes it names (Fig. 2a, 2g: "when M increases from
# 128 to 1024"): same architecture and dropout, learning rate scaled with the batch (Goyal et
# al.), as their protocol prescribes; a run at another batch size is no arm of these rows
LUO_BATCH = Contrast("train_batch_size", 1024, 128, match=("arch", "dropout"),
                     where={"lr_batch_scaled": True})
# Luo §4's rows pool data draws per configuration (claims.values.metrics.rel_error)
LUO_POOL = ("; pooled over data draws per load, batch size, learning rate, N and S (the row's "
            "name), a new data set per replicate")
BN_JITTER = ("batchnorm", "batchnorm_fixed_affine", "ghost_batchnorm")
SMOOTH_NOTE = (f"; a blow-up (non-finite probe) counts as {cm.BLOWUP_FACTOR:g} x the largest "
               "finite value of the compared pair (both arms, this experiment), 0 as the pair's "
               "smallest positive one")
# Margins (the smallest effect of interest, declared before any data; rules.py, outcomes.py).
# Where a paper gives a number it is the paper's, with where and how it was read; otherwise
# the project's, labelled as such.
PROJECT_RATIO = (float(np.log(1.25)), "project: a 25% change in the quantity (log 1.25), the "
                 "smallest ratio the project reads a qualitative 'improves' / 'reduces' as "
                 "claiming; the paper gives no number")
PROJECT_LOSS = (float(np.log(1.05)), "project: a 5% change in validation loss (log 1.05); "
                "Luo et al. give no number")
PROJECT_10 = "project: agreement within 10%, the project's tolerance; the paper gives none"
PD_CLAIM = ("BN concentrates the spline partition near the data, not near random points, at "
            "random initialization")
PD_QUANTITY = ("log((boundaries near train + .5) / (near random + .5)) at step 0, all layers, "
               "middle radius")
CLAIMS = (
    *(Claim(f"pd_data_vs_{base}", "Balestriero & Baraniuk", PD_CLAIM, "partition_density",
            PD_QUANTITY, _pd_concentration, ("batchnorm", "batchnorm_fixed_affine"),
            baseline=base, rule="more", margin=PROJECT_RATIO[0], margin_source=PROJECT_RATIO[1],
            what="boundary density near data relative to random points",
            protocol=P.BB_PARTITION)
      for base in ("none", "zero_bias", "random_bias")),
    Claim("ics_grad", "Santurkar et al.", "BN does not reduce (gradient) internal covariate "
          "shift", "ics", "log(ICS + 1e-4), ICS = 1 - cos(G, G') averaged over layers 2.. and "
          "checkpoints; effect = log((ICS_bn + 1e-4) / (ICS_none + 1e-4))", cm.ics,
          ("batchnorm",), rule="no_less", margin=float(np.log(1.25)),
          margin_source="project: BN's ICS at most 0.8x the plain net's (log 1.25) counts as a "
                        "reduction; Santurkar et al. give no number", what="ICS",
          protocol=P.SANTURKAR),
    Claim("lipschitz", "Santurkar et al.", "BN improves the Lipschitzness of the loss (smaller "
          "loss variation along the gradient; Figs. 4a, 10a)", "smoothness",
          "log(loss_max - loss_min over the probes), mean over early checkpoints (step <= 25% "
          "of the run; the absolute loss range Figs. 4a and 10a plot, widest for the plain net "
          "'especially in the initial phases of training', §3.2)" + SMOOTH_NOTE,
          cm.smooth("loss_variation", early=True), ("batchnorm",), rule="less",
          margin=PROJECT_RATIO[0],
          margin_source=PROJECT_RATIO[1], what="loss variation along the gradient",
          protocol=P.SANTURKAR),
    Claim("lipschitz_rel", "Santurkar et al.", "beyond the paper: BN lowers the loss variation "
          "along the gradient relative to the point's own loss", "smoothness",
          "log((loss_max - loss_min over the probes) / loss at the checkpoint), mean over "
          "checkpoints (the variation relative to the point's own loss, so that an arm that "
          "interpolates is compared on the same scale)" + SMOOTH_NOTE,
          cm.smooth("loss_variation", per="loss"), ("batchnorm",), rule="less",
          margin=PROJECT_RATIO[0], margin_source=PROJECT_RATIO[1], role="beyond the paper",
          what="loss variation along the gradient (per unit loss)", protocol=P.SANTURKAR),
    Claim("grad_pred", "Santurkar et al.", "BN improves gradient predictiveness (smaller l2 "
          "change of the gradient along it; Fig. 4b)", "smoothness",
          "log(max ||grad L(w - eta g) - g||), mean over early checkpoints (step <= 25% of "
          "the run; the absolute l2 change Fig. 4b plots, 'especially early in training', "
          "§3.2)" + SMOOTH_NOTE,
          cm.smooth("grad_pred_max", early=True), ("batchnorm",), rule="less",
          margin=float(np.log(10)),
          margin_source="paper: Santurkar et al. §3.2 / Fig. 4b, 'close to two orders of "
                        "magnitude' smaller absolute gradient change with BN (VGG, early "
                        "training), read as at least one order of magnitude (log 10)",
          paper_effect=-float(np.log(100)),
          paper_words="Santurkar et al. §3.2 (Fig. 4b, VGG, early training): about 0.01x",
          what="gradient change along the gradient", protocol=P.SANTURKAR),
    Claim("grad_pred_rel", "Santurkar et al.", "beyond the paper: BN lowers the gradient "
          "change along the gradient relative to the point's own gradient norm", "smoothness",
          "log(max ||grad L(w - eta g) - g|| / ||g||), mean over checkpoints (the gradient "
          "change relative to the point's own gradient norm)" + SMOOTH_NOTE,
          cm.smooth("grad_pred_max", per="grad_norm"), ("batchnorm",), rule="less",
          margin=PROJECT_RATIO[0], margin_source=PROJECT_RATIO[1], role="beyond the paper",
          what="gradient change along the gradient (per unit gradient norm)",
          protocol=P.SANTURKAR),
    Claim("beta_smooth", "Santurkar et al.", "BN lowers the effective beta-smoothness",
          "smoothness", "log(beta_eff), mean over checkpoints (beta_eff is a gradient change "
          "per unit step, already relative)" + SMOOTH_NOTE,
          cm.smooth("beta_eff"), ("batchnorm",), rule="less", margin=PROJECT_RATIO[0],
          margin_source=PROJECT_RATIO[1], what="effective beta-smoothness",
          protocol=P.SANTURKAR),
    Claim("lp_smooth", "Santurkar et al.", "l_p normalizations smooth the landscape like BN "
          "(lower effective beta-smoothness than no normalization)", "smoothness",
          "log(beta_eff), mean over checkpoints" + SMOOTH_NOTE, cm.smooth("beta_eff"), LP,
          rule="less", margin=PROJECT_RATIO[0], margin_source=PROJECT_RATIO[1],
          what="effective beta-smoothness", protocol=P.SANTURKAR),
    Claim("hessian_trace", "Santurkar et al.", "beyond the paper: BN lowers the Hessian's "
          "trace (the training loss's summed curvature, PyHessian) at the first checkpoint "
          "measured", "landscape_curvature", "log(Hutchinson trace of the Hessian of the "
          "sample's training loss) at each run's first measured checkpoint (a non-positive "
          "estimate is left out)", cm.first_log("trace"), ("batchnorm",), rule="less",
          margin=PROJECT_RATIO[0], margin_source=PROJECT_RATIO[1],
          role="beyond the paper", what="Hessian trace"),
    # one-sided: the paper says noisy BN does not hurt training (Fig. 2: it trains as well or
    # better), so noisy BN training better is no evidence against it
    Claim("noisy_bn", "Santurkar et al.", "noisy BN trains no worse than BN (Fig. 2: it trains "
          "as well or better; the project reads 'no worse' as a final training loss at most a "
          "factor 1.5 above BN's)", "training", "log(final train loss)",
          cm.final_train_loss, ("noisy_batchnorm",), baseline="batchnorm", rule="no_more",
          margin=float(np.log(1.5)),
          margin_source="project: a factor 1.5 (log 1.5) on the final training loss; Fig. 2 "
                        "gives no number", what="final training loss",
          protocol=P.SANTURKAR_NOISY),
    Claim("jitter_batch", "Balestriero & Baraniuk", "smaller mini-batches jitter BN's decision "
          "boundary more (Fig. 6)", "bn_jitter", "log(boundary band fraction at the smallest / "
          "largest batch size), mean over checkpoints", cj.jitter_batch_ratio,
          ("batchnorm", "batchnorm_fixed_affine"), baseline=None, rule="more",
          margin=float(np.log(4)),
          margin_source="paper: Balestriero & Baraniuk Eq. 13, var(mu_B) proportional to "
                        "1/batch: at batch 16 vs 256 the jitter's scale is sqrt(256/16) = 4x "
                        "(log 4)", paper_effect=float(np.log(4)),
          paper_words="Balestriero & Baraniuk Eq. 13: 4x at batch 16 vs 256",
          what="decision-boundary jitter at the smallest batch relative to the largest",
          protocol=P.BB_JITTER),
    Claim("jitter_ghost", "Balestriero & Baraniuk", "noise-controlled BN (a virtual batch smaller "
          "than the real one) jitters the decision boundary more than BN", "bn_jitter",
          "log(boundary band fraction) at the largest batch size, mean over checkpoints",
          cj.jitter_band, ("ghost_batchnorm",), baseline="batchnorm", rule="more",
          margin=PROJECT_RATIO[0], margin_source=PROJECT_RATIO[1],
          what="decision-boundary jitter", protocol=P.BB_JITTER),
    *(Claim(f"prop2_{s}", "Balestriero & Baraniuk", f"implementation check, not a test: at the "
            f"first BN layer Proposition 2's variance of BN's {t} is exact (the batch is a "
            "sample of the population it uses), so agreement within 10% checks the "
            "measurement's Monte Carlo", "bn_jitter", f"log(empirical / predicted var of {t}), "
            "first BN layer of fully connected nets, mean over checkpoints and batch sizes",
            cj.prop2_ratio(s), BN_JITTER, baseline=None, rule="equivalent",
            margin=float(np.log(1.1)), margin_source=PROJECT_10, role="implementation check",
            what=f"empirical variance of {t} relative to Proposition 2's", protocol=P.BB_JITTER)
      for s, t in (("mu", "mu_B"), ("sigma2", "sigma_B^2"))),
    *(Claim(f"prop2_deep_{s}", "Balestriero & Baraniuk", f"beyond the paper: Proposition 2's "
            f"formula for the mini-batch variance of BN's {t} (which assumes i.i.d. inputs) "
            "also holds within 10% at deeper BN layers, whose inputs earlier layers normalize "
            "by the same batch", "bn_jitter", f"log(empirical / predicted var of {t}), BN "
            "layers after the first of fully connected nets with a nonlinearity between BN "
            "layers (a linear net's next layer sees a batch mean fixed by beta), mean over "
            "layers, checkpoints and batch sizes", cj.prop2_ratio(s, deeper=True), BN_JITTER,
            baseline=None, rule="equivalent", margin=float(np.log(1.1)),
            margin_source=PROJECT_10, role="beyond the paper",
            what=f"empirical variance of {t} relative to Proposition 2's", protocol=P.BB_JITTER)
      for s, t in (("mu", "mu_B"), ("sigma2", "sigma_B^2"))),
    # Luo et al. plot no SGD runs against the closed form: an implementation check
    Claim("luo_sgd", "Luo et al.", "implementation check, not a test: vanilla SGD's "
          "generalization error follows the closed form (minimum-norm least squares; within "
          "10%), which the paper states but does not plot against runs", "teacher_student",
          "gen_error / closed form - 1, final checkpoint" + LUO_POOL, cm.rel_error(),
          ("none",), baseline=None, rule="equivalent", margin=0.1, margin_source=PROJECT_10,
          role="implementation check", curve=cm.luo_curve(),
          what="generalization error relative to the closed form", scale="relative",
          protocol=P.LUO_TS),
    # the project's corrected curve; Luo's own comparison is luo_bn_main (Fig. 1a)
    Claim("luo_bn", "Luo et al.", "beyond the paper: BN's generalization error follows the "
          "closed form of the "
          "objective Eq. 3 and App. C.3 make it equivalent to (within 10%): the PN loss plus "
          "zeta gamma^2, where BN's gamma^2 is its output variance over the batches, i.e. over "
          "the training set (gamma^2 = w~'(X'X/P)w~, not ||w~||^2/N), so the minimizer is least "
          "squares shrunk by 1/(1 + zeta), not a ridge; zeta from App. C.3 for how the arm "
          "normalizes: 3/(2M) for BN with mu_B, 1/(2M) for variance-only BN", "teacher_student",
          "gen_error / (least squares shrunk by 1/(1 + zeta)) - 1, final checkpoint" + LUO_POOL,
          cm.rel_error(), ("batchnorm", "weightnorm_varonly_bn"), baseline=None,
          rule="equivalent", margin=0.1, margin_source=PROJECT_10, role="beyond the paper",
          curve=cm.luo_curve(),
          what="generalization error relative to the shrunk least-squares closed form",
          scale="relative", protocol=P.LUO_TS),
    Claim("luo_bn_main", "Luo et al.", "Luo's own claim (§4, Fig. 1a): the paper's BN student "
          "(variance-only BN: no mu_B, beta = 0) follows WN + gamma decay at zeta = 1/(2M) as "
          "Fig. 1a prints it, Krogh & Hertz's ridge with lam = zeta (within 10%)",
          "teacher_student", "gen_error / the curve Luo Fig. 1a prints (WN + gamma decay at "
          "1/(2M), lam = zeta) - 1, final checkpoint" + LUO_POOL,
          cm.rel_error("rel_error_main"), ("weightnorm_varonly_bn",), baseline=None,
          rule="equivalent", margin=0.1,
          margin_source="project: within 10%; Luo et al. compare Fig. 1a's curves by eye",
          curve=cm.luo_curve("zeta_main", convention="paper", curve="ridge"),
          what="generalization error relative to Fig. 1a's printed curve", scale="relative",
          protocol=P.LUO_TS),
    Claim("luo_wn", "Luo et al.", "WN + gamma decay's generalization error follows the closed "
          "form of the objective it trains, mean loss + zeta gamma^2 with gamma^2 = ||w~||^2/N: "
          "Krogh & Hertz's ridge with lam = alpha zeta (within 10%)",
          "teacher_student", "gen_error / closed form (WN + gamma decay, ridge lam = alpha zeta) "
          "- 1, final checkpoint" + LUO_POOL, cm.rel_error(), ("weightnorm_gamma_decay",),
          baseline=None, rule="equivalent", margin=0.1, margin_source=PROJECT_10,
          curve=cm.luo_curve(),
          what="generalization error relative to the closed form", scale="relative",
          protocol=P.LUO_TS),
    # §5: gamma decay complements PN's missing batch noise, "making PN outperformed BN": a
    # lower validation loss, not merely one within a margin
    Claim("luo_pn", "Luo et al.", "PN + gamma decay generalizes better than BN at a normal "
          "batch size (lower validation loss; §5, Fig. 2a-b: 'making PN outperformed BN')",
          "generalization", TEST_LOSS + "; effect = log(loss_PN / loss_BN)",
          cm.final_log("test_loss"), ("population_norm",), baseline="batchnorm",
          rule="less", margin=PROJECT_LOSS[0], margin_source=PROJECT_LOSS[1], what="test loss",
          protocol=P.LUO_CNN),
    Claim("luo_bn_halves", "Luo et al.", "BN, and WN with mean-only or with variance-only BN, "
          "generalize better than WN alone (lower validation loss; §5, Fig. 2c-d)",
          "generalization", TEST_LOSS, cm.final_log("test_loss"),
          ("batchnorm", "weightnorm_meanonly_bn", "weightnorm_varonly_bn"),
          baseline="weightnorm", rule="less", margin=PROJECT_LOSS[0],
          margin_source=PROJECT_LOSS[1], what="test loss", protocol=P.LUO_CNN),
    Claim("luo_large_batch", "Luo et al.", "BN generalizes worse at a large batch: higher "
          "validation loss at the largest than at the smallest batch size, for the same samples "
          "seen and the learning rate scaled with the batch (§5, Fig. 2a, 2g)", "generalization",
          TEST_LOSS + "; effect = log(loss at the largest batch / at the smallest)",
          cm.final_log("test_loss"), ("batchnorm",), rule="more", contrast=LUO_BATCH,
          margin=PROJECT_LOSS[0], margin_source=PROJECT_LOSS[1],
          what="test loss at the largest batch", versus="that at the smallest",
          protocol=P.LUO_CNN),
    Claim("luo_gamma_batch", "Luo et al.", "BN's gamma^2 grows with the batch size (weaker "
          "regularization from the batch statistics; §5, Fig. 2e)", "generalization",
          "log(gamma^2) at the last checkpoint (mean over BN layers of the mean over units); "
          "effect = log ratio, largest batch / smallest", cm.final_log("gamma_sq"),
          ("batchnorm",), rule="more", contrast=LUO_BATCH, margin=PROJECT_RATIO[0],
          margin_source=PROJECT_RATIO[1], what="gamma^2 at the largest batch",
          versus="that at the smallest", protocol=P.LUO_CNN),
    Claim("luo_dropout", "Luo et al.", "dropout (ratio 0.1) after each residual block lowers "
          "BN's validation loss at a large batch (§5, Fig. 2g-h)", "generalization",
          TEST_LOSS + "; effect = log(loss with dropout 0.1 / without), runs of the same "
          "architecture, batch size and training schedule", cm.final_log("test_loss"),
          ("batchnorm",), rule="less", margin=PROJECT_LOSS[0], margin_source=PROJECT_LOSS[1],
          contrast=Contrast("dropout", 0.1, 0.0,
                            match=("arch", "train_batch_size", "training_schedule")),
          what="test loss with dropout", versus="that without", protocol=P.LUO_CNN),
    Claim("jitter_aug", "Balestriero & Baraniuk", "extra jitter of BN's statistics (the "
          "variances of mu_B and sigma_B raised beyond the batch's) increases test accuracy "
          "(§5: about +0.3-0.5 points with a ResNet9)", "generalization",
          "test accuracy (%) at the last checkpoint; effect = difference in points",
          cm.final_percent("test_accuracy"), ("batchnorm_jitter",), baseline="batchnorm",
          rule="more", margin=0.25,
          margin_source="paper: Balestriero & Baraniuk §5, +0.25 to +0.52 accuracy points "
                        "with jitter (ResNet9); the margin takes the lower end",
          paper_effect=0.25, paper_words="Balestriero & Baraniuk §5: +0.25 to +0.52 points",
          what="test accuracy", scale="points", protocol=P.BB_JITTER_AUG),
)
