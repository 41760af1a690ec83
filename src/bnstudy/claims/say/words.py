"""A ledger row in plain words: what its effect means, and what its verdict would mean.

The ledger's effect is a number on the claim's scale (a natural-log ratio for most claims, a
difference in percentage points, a relative deviation from a closed form); a reader should not
need the code to read it. :func:`effect_words` turns a row into e.g. "batchnorm's ICS is 4.0x
none's [1.1x, 14x]", and :func:`rule_words` says what each outcome means for
the row's rule and margin, e.g. for "BN does not reduce ICS": "supported: batchnorm's ICS is
reliably above 0.8x none's; contradicted at this setting: reliably below it". A claim declares
its scale and a short name for its quantity (``scale``, ``what`` on
:class:`~bnstudy.claims.declare.claim.Claim`).

Scales: ``log`` (effect = log(arm / baseline), shown as a ratio ``exp(effect)``), ``points``
(a difference in percentage points), ``relative`` (arm / reference - 1, shown in percent),
``diff`` (a plain difference).
"""

from __future__ import annotations

import math

from bnstudy.claims.decide import outcomes as O

SCALES = ("log", "points", "relative", "diff")


def _finite(*xs) -> bool:
    return all(x is not None and isinstance(x, (int, float)) and math.isfinite(x) for x in xs)


def _ratio(x: float) -> str:
    if abs(x) > 690:  # beyond a float's exp (a skew-corrected bound at few seeds can be)
        return f"e^{x:.3g}x"
    r = math.exp(x)  # three figures near 1 (1.04x), two elsewhere (0.26x), whole from 10x
    if r >= 1e6 or r < 1e-6:
        return f"{r:.1e}x"
    return f"{r:.3g}x" if 0.5 <= r < 2 else f"{r:.2g}x" if r < 10 else f"{r:.0f}x"


def _show(x: float, scale: str) -> str:
    if scale == "log":
        return _ratio(x)
    if scale == "points":
        return f"{x:+.2g} points"
    if scale == "relative":
        return f"{100 * x:+.2g}%"
    return f"{x:+.3g}"


def _sides(norm: str, baseline: str | None) -> tuple[str, str]:
    arm = f"{norm}'s" if norm else "the"
    if not baseline:
        return arm, ""
    return arm, baseline if " " in baseline else f"{baseline}'s"


def effect_words(effect, low, high, *, scale: str, what: str, norm: str = "",
                 baseline: str | None = None) -> str:
    """The effect and its interval as a sentence fragment ('' when there is no effect)."""
    if not _finite(effect):
        return ""
    what = what or "quantity"
    arm, base = _sides(norm, baseline)
    ci = f" [{_show(low, scale)}, {_show(high, scale)}]" if _finite(low, high) else ""
    if scale == "log" and base:
        return f"{arm} {what} is {_ratio(effect)} {base}{ci}"
    if scale == "log":
        return f"{arm} {what} is {_ratio(effect)}{ci}"
    if base:
        return f"{arm} {what} differs from {base} by {_show(effect, scale)}{ci}"
    return f"{arm} {what}: {_show(effect, scale)}{ci}"


def beside_paper(rule: str, effect, low, high, margin: float, paper_words: str = "", *,
                 scale: str) -> str:
    """What goes after a row's effect: the paper's number beside ours where it has one
    ("; Santurkar et al. §3.2: about 0.01x"), and, for a directional row supported with an
    interval inside the margin, that the effect is smaller than the margin's."""
    out = f"; {paper_words}" if paper_words else ""
    if rule in ("less", "more") and margin > 0 and _finite(effect, low, high):
        inside = low > -margin if rule == "less" else high < margin
        paper_side = high < 0 if rule == "less" else low > 0
        if inside and paper_side:
            edge = _ratio(-margin if rule == "less" else margin) if scale == "log" else _show(
                -margin if rule == "less" else margin, scale)
            out += f"; supported but reliably smaller than the margin ({edge})"
    return out


def rule_words(rule: str, margin: float, *, scale: str, what: str, norm: str = "",
               baseline: str | None = None) -> str:
    """What each outcome means for this row (with a directional rule's margin, also when it is
    absent at this setting)."""
    what = what or "quantity"
    arm, base = _sides(norm, baseline)
    ref = f"{base}" if base else ("1x" if scale == "log" else "0")
    if rule in ("less", "more"):
        word = "below" if rule == "less" else "above"
        other = "above" if rule == "less" else "below"
        tail = f" {base}" if base else (" 1x" if scale == "log" else " 0")
        text = (f"supported: {arm} {what} is reliably {word}{tail}; contradicted at this setting: "
                f"reliably {other} it")
        if margin > 0:
            edge = (_ratio(-margin if rule == "less" else margin) if scale == "log"
                    else _show(-margin if rule == "less" else margin, scale))
            text += (f"; absent at this setting: reliably not {word} {edge}"
                     f"{' ' + base if base else ''} (the margin)")
        return text
    if scale == "log":
        lo, hi = _ratio(-margin), _ratio(margin)
    else:
        lo, hi = _show(-margin, scale), _show(margin, scale)
    of = f" {base}" if base else ""
    if rule == "no_less":
        return (f"supported: {arm} {what} is reliably above {lo}{of}; contradicted at this "
                f"setting: reliably below {lo}{of}")
    if rule == "no_more":
        return (f"supported: {arm} {what} is reliably below {hi}{of}; contradicted at this "
                f"setting: reliably above {hi}{of}")
    if rule == "equivalent":
        return (f"supported: {arm} {what} is reliably within {lo} to {hi}{of or ' of ' + ref}; "
                f"contradicted at this setting: reliably outside that range")
    raise ValueError(f"unknown rule {rule!r}")


# The ledger's outcomes are written in their own words everywhere (bnstudy.claims.decide.outcomes
# defines them once); 'contradicted at this setting' means a confident effect on the rule's other
# side, not an absence of evidence; 'undecided' means the interval straddles the rule's boundary.
VERDICT_WORDS = {v: v for v in O.ALL}
VERDICT_MEANING = dict(O.MEANING)


def verdict_word(verdict: str) -> str:
    """The words a reader sees for a ledger verdict (``mixed`` for a claim whose rows
    disagree): the outcome itself, an older ledger's words translated ('not supported' is
    'contradicted at this setting')."""
    return O.outcome(verdict)
