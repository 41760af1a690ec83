"""Each claim's paper protocol: the setting the paper ran, declared once beside the claims
(:data:`bnstudy.claims.ledger.CLAIMS` names them), in the paper's units and converted to the
project's.

A :class:`Protocol` states the paper's data, model, optimizer, learning rate (``lr`` in the
project's loss units: every loss here is a *mean* over samples and outputs; ``lr_paper`` the
paper's own number and loss), steps, batch size, where and when the quantity is measured
(``where``; the probe range of the smoothness measure in ``probes``) and which quantity decides
(``decides``). A claim may name several (Santurkar's smoothness: the DLN of App. A and the VGG
on CIFAR-10); a row takes the one that matches its experiment (:func:`pick`).
:mod:`bnstudy.claims.say.deviations` compares an experiment's config with it and writes the
concrete differences into the ledger's ``deviations`` column, so that no verdict reads as a
statement about the paper's setting when it was measured in another.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Protocol:
    """One paper setting. ``None`` (or empty) fields are not stated by the paper and are not
    compared."""

    name: str  # the paper's section / figure
    data: tuple[str, ...]  # dataset kinds that are the paper's data
    data_text: str
    arch: tuple[str, ...]  # architectures that are the paper's model
    model_text: str
    depth: int | None = None
    width: int | None = None
    n_train: int | None = None
    optimizer: str = ""
    lr: float | None = None  # in the project's loss units (mean loss)
    lr_paper: str = ""  # the paper's number, in its own loss
    momentum: float | None = None
    batch_size: int | str | None = None  # "full": full-batch
    steps: int | None = None
    probes: tuple[float, float] | None = None  # smoothness probe range, multiples of lr
    where: str = ""  # where and when the paper measures the quantity
    decides: str = ""  # which quantity decides the claim in the paper
    nearest_for: tuple[str, ...] = ()  # other data kinds this setting is the closest one for
    data_options: tuple[tuple[str, float], ...] = ()  # the paper's dataset options, compared
    population: int | None = None  # training samples PN's population statistics come from

    def describe(self) -> str:
        """The protocol in a few words, for the ledger's ``protocol`` column."""
        parts = [f"{self.name}: {self.model_text} on {self.data_text}"]
        if self.optimizer:
            parts.append(self.optimizer)
        if self.lr is not None:
            parts.append(f"lr {self.lr:g}" + (f" ({self.lr_paper})" if self.lr_paper else ""))
        if self.batch_size is not None:
            parts.append("full batch" if self.batch_size == "full"
                         else f"batch {self.batch_size}")
        if self.steps:
            parts.append(f"{self.steps:,} steps")
        if self.where:
            parts.append(self.where)
        if self.decides:
            parts.append(f"decided by {self.decides}")
        return "; ".join(parts)


def pick(protocols: tuple[Protocol, ...], arch: str | None, kind: str | None) -> Protocol | None:
    """The protocol a row is compared with: the first whose architecture is the experiment's,
    else the first whose data is, else the first that names the data kind as one it is the
    nearest setting for (a classification MLP on digits: Santurkar's VGG on CIFAR-10, not the
    DLN's regression), else the first declared."""
    for p in protocols:
        if arch in p.arch:
            return p
    for p in protocols:
        if kind in p.data:
            return p
    for p in protocols:
        if kind in p.nearest_for:
            return p
    return protocols[0] if protocols else None


# -- Santurkar et al. 2018, App. A ---------------------------------------------------------
CLASSIFICATION = ("digits", "star2d", "mnist", "cifar100", "svhn", "two_moons")
DECIDES = ("the paper's loss range and gradient l2 change along the gradient in early training "
           "(the lipschitz and grad_pred rows: checkpoints at step <= 25% of the run, "
           "claims.values.stage.early), and beta_eff over training")
SANTURKAR_DLN = Protocol(
    "Santurkar App. A (Figs. 5, 10)", ("gaussian_linear",),
    "Gaussian inputs, 1000 samples, y = Ax with A 10x10", ("dln",), "a 25-layer deep linear "
    "network (10x10)", depth=25, n_train=1000, optimizer="full-batch gradient descent",
    lr=1e-2, lr_paper="1e-6 on the summed squared error over 1000 samples x 10 outputs",
    momentum=0.0, batch_size="full", steps=10_000, probes=(0.01, 30.0),
    where="at every training step, probes [1/100, 30] x lr along the gradient",
    decides=DECIDES)
SANTURKAR_VGG = Protocol(
    "Santurkar App. A (Figs. 1-4)", ("cifar10",), "CIFAR-10 without augmentation", ("vgg",),
    "a VGG", optimizer="SGD", lr=0.1, lr_paper="0.1 on the mean cross-entropy",
    batch_size=128, steps=15_000, probes=(0.5, 4.0),
    where="at every training step, probes [1/2, 4] x lr along the gradient",
    decides=DECIDES, nearest_for=CLASSIFICATION)
SANTURKAR = (SANTURKAR_DLN, SANTURKAR_VGG)
SANTURKAR_NOISY = (Protocol(
    "Santurkar §2.1 (Fig. 2)", ("cifar10",), "CIFAR-10 without augmentation", ("vgg",),
    "a VGG", optimizer="SGD", lr=0.1, lr_paper="0.1 on the mean cross-entropy",
    batch_size=128, steps=15_000, where="training and test accuracy over training",
    decides="training performance", nearest_for=CLASSIFICATION),)

# -- Balestriero & Baraniuk ----------------------------------------------------------------
BB_PARTITION = (
    Protocol("BB §3.3 (Fig. 3)", ("star2d",), "50 points of a 2-D star", ("mlp",),
             "an 11-layer MLP of width 1024", depth=11, width=1024, n_train=50,
             where="at random initialization, boundaries in epsilon-balls around the data",
             decides="boundary density near data against elsewhere"),
    Protocol("BB §3.3 (Fig. 4)", ("cifar10",), "CIFAR-10 and 100 Gaussian images",
             ("resnet9",), "a ResNet9", where="at random initialization, boundaries in "
             "epsilon-balls around CIFAR and random images",
             decides="boundary density near data against near random images"),
)
BB_JITTER = (Protocol(
    "BB §5 (Figs. 6-7)", ("star2d", "two_moons"), "a toy 2-D binary problem", ("mlp",),
    "a small ReLU MLP", where="decision-boundary realizations over mini-batches at "
    "initialization and after training, |B| = 16 and 256",
    decides="the boundary's spread across mini-batches"),)
BB_JITTER_AUG = (Protocol(
    "BB §5 (jitter augmentation)", ("cifar10", "cifar100", "svhn"), "CIFAR-10/100 and SVHN",
    ("resnet9",), "a ResNet9", where="test accuracy after training, 5 runs, variances of "
    "mu and sigma raised by about 15%", decides="test accuracy"),)

# -- Luo et al. 2019 -------------------------------------------------------------------------
LUO_TS = (Protocol(
    "Luo §4 (Fig. 1a)", ("teacher_student",), "a linear teacher, N = 4096 inputs, noise "
    "S = 0.25", ("unit",), "a single linear unit", data_options=(("N", 4096), ("S", 0.25)),
    optimizer="SGD (BN: M = 32)",
    where="generalization error after training, against the closed forms",
    decides="the generalization error at each load alpha"),)
LUO_CNN = (Protocol(
    "Luo §5 (Fig. 2)", ("cifar10",), "CIFAR-10", ("resnet18", "cnn"),
    "a ResNet18 (and the Salimans-Kingma CNN)", optimizer="SGD, momentum 0.9, lr scaled "
    "with the batch, decayed 1e-4 per step", momentum=0.9,
    where="training and validation loss over training, M = 128 and 1024",
    decides="the validation loss", population=10_000),)

# -- Dannemann & Junike ----------------------------------------------------------------------
DANNEMANN = (Protocol(
    "Dannemann & Junike (the counterexample to Lemma 4.5)", (), "their two-point example", (),
    "the plain and the BN loss of their example", where="computed exactly, no training runs",
    decides="the BN gradient at the plain optimum and Lemma 4.5's inequality"),)
