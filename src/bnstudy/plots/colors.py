"""One colour and marker per normalizer, the same in every figure of every study.

Colours come from seaborn's colour-blind palette (10 hues) plus black for the unnormalized
baseline; a normalizer keeps its colour whatever else a figure shows, so BN is the same blue in
the default study, in Balestriero's and in Santurkar's. With 20 registered normalizers and 11
colours some share a colour; the table below gives each shipped study's normalizers distinct
colours (tested), and every (colour, marker) pair is unique, so any set of normalizers is told
apart by colour and marker together. A normalizer registered later (its own module, no edit
here) gets a colour of its own, one of :data:`NEW`, hues that no shipped normalizer's colour and
no :data:`OTHER` hue comes close to, and a marker, both derived from its name (stable across runs
and studies). To choose its colour instead, add one line to :data:`NORMS`:
``"<name>": ("#rrggbb", "o"),`` (``tests/test_norm_colors.py`` checks that the pair is unique and
each shipped study's colours distinct).
"""

from __future__ import annotations

import hashlib

# seaborn's "colorblind" palette, fixed here so a seaborn update cannot recolour the figures
CB = ("#0173b2", "#de8f05", "#029e73", "#d55e00", "#cc78bc", "#ca9161", "#fbafe4", "#949494",
      "#ece133", "#56b4e9")
BLACK = "#000000"
# Hues that are not normalizers (data classes, batch sizes): Paul Tol's colour-blind-safe
# "muted" scheme, none of it a normalizer's colour, so that blue and orange keep meaning BN
# and its kin in every figure
OTHER = ("#cc6677", "#332288", "#ddcc77", "#117733", "#882255", "#44aa99", "#999933",
         "#aa4499", "#88ccee")
MARKERS = ("o", "s", "^", "v", "D", "P", "X")
# hues for normalizers registered without an entry in NORMS: each at least 0.2 (RGB distance)
# from every shipped normalizer's colour, every OTHER hue and each other (the first is the one
# colour-blind hue no shipped normalizer uses)
NEW = ("#ece133", "#e7298a", "#17becf", "#6a3d9a", "#800000", "#66a61e", "#004488", "#ff6f61")

# name -> (colour, marker)
NORMS = {
    "none": (BLACK, "o"),
    "batchnorm": (CB[0], "o"),
    "batchnorm_fixed_affine": (CB[9], "s"),
    "layernorm": (CB[2], "D"),
    "groupnorm": (CB[4], "v"),
    "instancenorm": (CB[5], "P"),
    "weightnorm": (CB[3], "o"),
    "noisy_batchnorm": (CB[1], "X"),
    "batchnorm_jitter": (CB[6], "D"),
    "ghost_batchnorm": (CB[1], "s"),
    "l1norm": (CB[2], "^"),
    "l2norm": (CB[4], "s"),
    "linfnorm": (CB[5], "v"),
    "population_norm": (CB[1], "^"),
    "weightnorm_meanonly_bn": (CB[2], "s"),
    "weightnorm_varonly_bn": (CB[9], "^"),
    "weightnorm_gamma_decay": (CB[4], "D"),
    "bn_init": (CB[3], "P"),
    "zero_bias": (CB[7], "o"),
    "random_bias": (CB[2], "v"),
}


_TAKEN = set(NORMS.values())
_FREE = tuple((c, m) for m in MARKERS for c in NEW if (c, m) not in _TAKEN)


def _derived(name: str) -> tuple[str, str]:
    """A (colour, marker) pair of a :data:`NEW` hue, chosen by a hash of ``name``: stable
    across runs and studies, and a colour apart from every shipped normalizer's."""
    h = int.from_bytes(hashlib.sha256(name.encode()).digest()[:4], "big")
    return _FREE[h % len(_FREE)]


def norm_color(name: str) -> str:
    """The normalizer's colour (a hex string)."""
    return NORMS.get(name, _derived(name))[0]


def norm_marker(name: str) -> str:
    """The normalizer's marker (a matplotlib marker code)."""
    return NORMS.get(name, _derived(name))[1]


def norm_palette(names) -> dict[str, str]:
    """``{name: colour}`` for seaborn's ``palette=`` with ``hue="norm"``."""
    return {n: norm_color(n) for n in names}


def norm_markers(names) -> dict[str, str]:
    """``{name: marker}`` for seaborn's ``markers=`` with ``style="norm"``."""
    return {n: norm_marker(n) for n in names}


def _lighter(color: str, share: float) -> str:
    """``color`` mixed with white (``share`` of white, 0..1), as a hex string."""
    rgb = [int(color[i:i + 2], 16) for i in (1, 3, 5)]
    return "#" + "".join(f"{round(c + (255 - c) * share):02x}" for c in rgb)


def arm_palette(arms, norm_of=lambda arm: str(arm).split(" (")[0].split(",")[0]) -> dict:
    """``{arm: colour}`` for arms named after a normalizer ('batchnorm (full batch)',
    'none, alpha=2'): each arm takes its normalizer's colour (:func:`norm_color`), a second or
    later arm of the same normalizer a lighter shade of it, so that BN is BN's colour here too."""
    seen: dict[str, int] = {}
    out = {}
    for arm in arms:
        norm = norm_of(arm)
        k = seen.get(norm, 0)
        seen[norm] = k + 1
        out[arm] = norm_color(norm) if k == 0 else _lighter(norm_color(norm),
                                                            min(0.2 + 0.2 * k, 0.7))
    return out


def other_colors(n: int) -> list[str]:
    """``n`` colours for a hue that is not a normalizer (:data:`OTHER`, repeated past 9)."""
    return [OTHER[i % len(OTHER)] for i in range(n)]
