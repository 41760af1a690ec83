"""What one claim declares, before any data (:class:`Claim`): its paper and words, the table and
per-run quantity it reads (a metric of :mod:`bnstudy.claims.values`), the normalizers or
experiments (a :class:`bnstudy.claims.declare.contrast.Contrast`) it compares, its rule and
margin with the margin's source, the paper's own effect, its role and its paper protocol
(:mod:`bnstudy.claims.declare.protocols`). The claims themselves are listed in
:mod:`bnstudy.claims.declared`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pandas as pd

from bnstudy.claims.declare.contrast import Contrast


@dataclass(frozen=True)
class Claim:
    key: str
    paper: str
    claim: str
    table: str
    quantity: str
    metric: Callable[[pd.DataFrame], pd.Series]  # table -> one value per (experiment, norm, seed)
    norms: tuple[str, ...]
    baseline: str | None = "none"  # None: the values themselves are the effect (one-sample)
    rule: str = "less"
    margin: float = 0.0
    # where ``margin`` comes from, declared with it before any data: "paper: <figure, table or
    # equation, and how the number was read>" or "project: <why this value>"
    margin_source: str = ""
    # the paper's own effect on the ledger's scale where the paper gives a number (None: it
    # does not), and that number in the paper's words, printed beside ours
    paper_effect: float | None = None
    paper_words: str = ""
    role: str = "test"  # or "implementation check", "beyond the paper": see the docstring
    curve: Callable[[pd.DataFrame, str, str], str] | None = None  # (table, norm, experiment)
    contrast: Contrast | None = None  # pairs experiments instead of normalizers (contrast.py)
    # the row in words (claims/say/words.py): the quantity's short name, the effect's scale, and
    # the compared side where it is not "<baseline>'s" (a contrast's other experiment)
    what: str = ""
    scale: str = "log"
    versus: str = ""
    # the paper's setting(s) the claim was made in (claims/declare/protocols.py); a row's
    # experiment is compared with the one that matches it (claims/say/deviations.py)
    protocol: tuple = ()
