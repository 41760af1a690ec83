"""What the columns of the study-level tables mean: the runs' identifying columns, the training
histories (``training``), the Dannemann-Junike analysis (``dannemann``), the claims ledger
(``claims``) and the replication rounds (``replication``).

Each meaning is read off the code that builds the rows (named in :data:`ROWS`), with its units;
:mod:`bnstudy.column_docs` renders them and its test checks them against the rows the code
writes. Losses are the training loss: mean cross-entropy (nats) for classification, mean squared
error for regression.
"""

from __future__ import annotations

from bnstudy.tables.value_range import FRACTION, NONNEGATIVE, Range

RUN_IDS = {
    "experiment": ("string",
                   "the experiment (a config `experiments` entry; swept ones by generated name)"),
    "dataset": ("string", "the experiment's dataset (a config `datasets` entry)"),
    "model": ("string", "the experiment's model (a config `models` entry)"),
    "norm": ("string", "the run's normalizer (`python -m bnstudy list normalizers`)"),
    "seed": ("integer", "the run's seed (initialization, batch order, augmentation, noise)"),
}

ROWS = {
    "training": "one row per run, evaluation step and split (each run's `history.parquet`, "
                "`bnstudy.train.loop`)",
    "dannemann": "one row per record of the Dannemann-Junike counterexample "
                 "(`bnstudy.analyses.dannemann`); a column is empty where its record has none",
    "claims": "the claims ledger: one row per claim and compared pair, or one per claim not "
              "measured (`bnstudy.claims.ledger`)",
    "replication": "one row per replication round, replicated experiment still open and ledger "
                   "row over its runs (`bnstudy.replication.rounds`)",
}

COLUMNS = {
    "training": {
        "step": ("integer",
                 "SGD step of the evaluation (0: the initialization), or of the update whose "
                 "mini-batch loss was not finite (split `batch`)"),
        "split": ("string",
                  "`train` or `test`: the whole set, in eval mode; `batch`: the mini-batch of "
                  "the step at which the run diverged"),
        "loss": ("float", "mean loss over the split (cross-entropy in nats, or MSE)"),
        "accuracy": ("float",
                     "fraction of the split classified correctly, 0 to 1 (NaN for regression "
                     "and `batch` rows)"),
        "lr": ("float", "the learning rate of the step (the config's schedule)"),
        "wall_time": ("float", "seconds since training started (a resumed run keeps its clock)"),
        "diverged": ("boolean",
                     "whether the run stopped on a non-finite mini-batch loss (same in every row "
                     "of the run)"),
    },
    "dannemann": {
        "record": ("string", "`data`, `gradient`, `optimum`, `landscape`, `trajectory`, `final` or "
                             "`lemma`: what the row holds"),
        "sample": ("integer", "data: the sample's index (0 to 2)"),
        "x1": ("float", "data: the sample's first input feature"),
        "x2": "data: the sample's second input feature",
        "y": "data: the sample's label",
        "method": ("string",
                   "gradient: how the BN gradient at W* was obtained; optimum: how the optimum "
                   "was found"),
        "objective": ("string", "`bn`: the cost with BN, C^(w); `plain`: the cost without, C(w)"),
        "w1": "first weight: of W* (gradient), the optimum, or the GD iterate",
        "w2": "second weight: of W* (gradient), the optimum, or the GD iterate",
        "grad_w1": "gradient: dC^/dw1 at W*",
        "grad_w2": "gradient: dC^/dw2 at W*",
        "grad_norm": ("float",
                      "gradient: ||grad C^(W*)||_2; final: the gradient norm at the last iterate"),
        "grad_dot_w": "gradient: <grad C^(W*), W*> (0 for a scale-invariant cost)",
        "loss": "the cost at the row's w, a summed squared error: C^ for `bn` rows, C for "
                "`plain` (NaN for `paper_reported`)",
        "angle_deg": "direction of w, atan2(w2, w1), in degrees",
        "bn_loss_at": "optimum `plain_least_squares`: C^ at W*",
        "line_residual": "3 w1 - 5 w2 (0 on the line of the BN optima)",
        "radius": ("float", "landscape: the scan's radius, ||W*||"),
        "n_minima": ("integer",
                     "optimum `bn_angle_scan`: local minima the angle scan found (count)"),
        "init": ("integer", "index of the GD start (0: the paper's W0 = W*, then seeded draws)"),
        "init_label": ("string", "`paper W0 = W*` or `random`"),
        "w0_1": "first weight of the start W0",
        "w0_2": "second weight of the start W0",
        "step": "trajectory: the GD step; final: the steps run",
        "lr": "final: the GD learning rate",
        "angle_error_deg": "final: the angle of w minus the scan minimum's, wrapped to "
                           "[-180, 180) degrees",
        "line_residual_normalized": "final: (3 w1 - 5 w2) / (sqrt(34) ||w||), the sine of the "
                                    "angle to the line 3 w1 = 5 w2",
        "dist_to_wstar": "final: ||w - W*||_2",
        "inner_w0_wstar": "lemma: <W0, W*>",
        "hypothesis": ("boolean", "lemma: <W0, W*> > 0, Lemma 4.5's hypothesis"),
        "lhs_closest": "lemma: ||W0 - W_bn||^2 to the closest BN optimum (an infimum)",
        "lhs_reached": "lemma: ||W0 - w||^2 to the optimum GD on C^ reached from W0",
        "rhs": "lemma: ||W0 - W*||^2 - (||W*||^2 - <W*, W0>)^2 / ||W*||^2, Lemma 4.5's bound",
        "holds_closest": ("boolean", "lemma: lhs_closest <= rhs"),
        "holds_reached": ("boolean", "lemma: lhs_reached <= rhs"),
    },
    "claims": {
        "claim_id": ("string", "the claim's key (`bnstudy.claims.ledger.CLAIMS`)"),
        "paper": ("string", "the paper that makes the claim"),
        "claim": ("string", "the claim in words"),
        "quantity": ("string",
                     "the per-run number compared and how it is reduced (its scale: usually a "
                     "log)"),
        "rule": ("string", "when the verdict is each outcome (bnstudy.claims.decide.outcomes), "
                           "from the interval"),
        "margin": "the smallest effect of interest, declared with the claim before data (its "
                  "scale; 0: none)",
        "margin_source": ("string", "where the margin comes from: `paper: <figure, table or "
                                    "equation, how read>` or `project: <why>`"),
        "baseline": ("string",
                     "the compared normalizer, or (a contrast) the compared experiment; empty "
                     "for a one-sample row"),
        "role": ("string", "`test`, `implementation check` or `beyond the paper`"),
        "curve": ("string", "Luo rows: the closed form and constant compared with"),
        "verdict": ("string", "`supported`, `contradicted at this setting`, `absent at this "
                               "setting`, `undecided` or `not measured` "
                               "(bnstudy.claims.decide.outcomes)"),
        "note": ("string",
                 "why a row is not measured; collapsed or diverged runs, schedule confounds; "
                 "the checkpoints a stage-matched row used (bnstudy.claims.values.stage); a "
                 "verdict's course along an lr axis; an undecided row's shortfall against its "
                 "replication budget"),
        "protocol": ("string", "the paper's setting the claim was made in, in words "
                               "(bnstudy.claims.declare.protocols)"),
        "deviations": ("string",
                       "where the row's experiment departs from that protocol, '; '-separated, "
                       "generated from the study config (bnstudy.claims.say.deviations); empty "
                       "when the ledger was built without the config (a replication round)"),
        "absolute_effect": "smoothness rows: the paired log ratio of the paper's absolute "
                           "quantity (loss range, gradient l2 change, beta_eff) on the same "
                           "runs and checkpoints",
        "absolute_ci_low": "lower end of absolute_effect's interval at `interval_level`",
        "absolute_ci_high": "upper end of absolute_effect's interval at `interval_level`",
        "experiment": "the experiment whose runs the row compares",
        "dataset": "that experiment's dataset",
        "model": "that experiment's model",
        "norm": "the normalizer tested (the arm)",
        "value": ("float",
                  "mean over seeds of the arm's per-run quantity (dannemann: ||grad C^(W*)||)"),
        "baseline_value": "mean over seeds of the baseline's per-run quantity (0: one-sample)",
        "effect": "the rule's estimate of the paired effect, arm - baseline, in the quantity's "
                  "scale: the Hodges-Lehmann shift (median of the Walsh averages; dannemann: "
                  "||grad C^(W*)||)",
        "effect_mean": "mean over seeds of the paired effect",
        "ci_low": "lower end of the rule's interval at `interval_level` (skew-corrected t and "
                  "exact signed-rank, each at half the level, intersected: "
                  "bnstudy.claims.decide.robust)",
        "ci_high": "upper end of the rule's interval at `interval_level` "
                   "(bnstudy.claims.decide.robust)",
        "p_supported": "one-sided p-value of the supported outcome (the rule's, unscaled)",
        "p_contradicted": "one-sided p-value of the contradicted outcome (the rule's, unscaled)",
        "p_absent": "one-sided p-value of the absent outcome (NaN without a margin)",
        "cohens_dz": "Cohen's d_z: effect_mean / effect_sd",
        "effect_sd": "standard deviation of the paired effects over seeds (ddof 1)",
        "effect_skew": "sample skewness of the paired effects over seeds (m3 / m2^1.5)",
        "skew_flag": "whether effect_skew is beyond what normal differences give at 95% "
                     "(the verdict then rests on the interval's skewness correction)",
        "n_seeds": ("integer", "seeds with a finite paired effect (count)"),
        "in_words": "the effect and its interval as a sentence (an undecided row whose "
                    "seeds_needed its replication budget cannot buy says so: "
                    "bnstudy.replication.budget)",
        "verdict_means": "what each outcome means for this row",
        "interval_level": "level of the row's interval: the study's `ci`, or, over a replicated "
                          "experiment, 1 - alpha_k of the look its paired seeds were taken at",
        "power_level": "level the power columns use: interval_level after Holm's step at the "
                       "row's rank, 1 - alpha_k / (m - j + 1)",
        "seeds_needed": "seeds for 80% power at the observed effect and spread, at "
                        "power_level (inf on the rule's boundary)",
        "seeds_needed_low": "seeds_needed at the upper end of the 90% interval of d_z",
        "seeds_needed_margin": "seeds for 80% power against the margin point of a directional "
                               "rule (where absent at this setting is decided), at power_level",
        "paper_effect": "the paper's own effect on the ledger's scale, where the paper gives a "
                        "number (NaN: it gives none)",
        "seeds_needed_high": "seeds_needed at the lower end of the 90% interval of d_z (inf "
                             "where it reaches the boundary)",
        "detectable_effect": "smallest distance from the rule's boundary the seeds resolve "
                             "with 80% power at power_level (the effect's units)",
        "p_value": "p-value of the rule's decision (scaled by alpha / alpha_k at a sequential "
                   "look)",
        "p_adjusted": "Holm-adjusted p-value over the study's measured test rows",
        "adjusted_verdict": ("string", "the verdict after Holm's adjustment (`undecided` where "
                                       "p_adjusted >= alpha)"),
    },
    "replication": {
        "round": "the round (0-based)",
        "experiment": "the replicated experiment",
        "look": "its look at this round: index of its planned round (0-based)",
        "n_seeds": "the ledger row's paired seeds (count); the experiment's seeds in a row "
                   "without a claim",
        "continue": "whether the experiment gets the next round's seeds",
        "next_norms": "the normalizers the next round's seeds go to, comma-separated",
        "claim_id": "the ledger row's claim (empty: the experiment has no measured row)",
        "row_experiment": "the ledger row's experiment (a contrast row's may be another)",
        "norm": "the ledger row's normalizer",
        "verdict": "the ledger row's verdict at this round",
        "adjusted_verdict": "the ledger row's verdict after Holm's adjustment",
        "interval_level": "level of the ledger row's interval (1 - alpha_k of the look)",
    },
}

# Declared in bnstudy.columns but carried by no table the package writes.
OTHER = {
    "n_runs": ("integer",
               "runs in a summary group (`bnstudy.tables.intervals.summarize` and the variance "
               "split, computed for the report, not written)"),
    "n_inits": ("integer",
                "no written table carries it (the dannemann analysis's option of that name: "
                "its random GD starts)"),
    "n_angles": ("integer",
                 "no written table carries it (the dannemann analysis's option of that name: "
                 "directions of its angle scan)"),
}

# The values each column can hold (bnstudy.tables.ranges), checked on every read of a table:
# table "all" holds the names that mean one thing in every table.
RANGES = {
    "all": {"seed": NONNEGATIVE, "step": NONNEGATIVE, "n_seeds": NONNEGATIVE,
            "n_runs": NONNEGATIVE},
    "training": {
        "loss": Range(low=0, finite=True, unless="diverged"),
        "accuracy": FRACTION,
        "lr": Range(low=0, finite=True),
        "wall_time": Range(low=0, finite=True),
        "diverged": Range(marks="loss"),
    },
}
