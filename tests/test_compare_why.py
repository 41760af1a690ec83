"""`compare` says why each changed ledger row moved: the quantity, the rule, the seeds, or (none
of these) the data; a row in one ledger only comes from the declarations."""

from __future__ import annotations

import pandas as pd

from bnstudy.claims.say import compare


def _ledger(**over) -> pd.DataFrame:
    row = {"claim_id": "grad_pred", "experiment": "digits", "dataset": "digits",
           "model": "mlp", "norm": "batchnorm", "baseline": "none", "quantity": "log abs",
           "rule": "less", "margin": 2.3, "role": "test", "interval_level": 0.95,
           "n_seeds": 6, "verdict": "undecided", "adjusted_verdict": "undecided",
           "effect": -0.5, "ci_low": -1.0, "ci_high": 0.1}
    row.update(over)
    return pd.DataFrame([row])


def test_each_reason_is_named_from_what_else_differs():
    a = _ledger()
    cases = {"the data": _ledger(verdict="supported", effect=-0.9),
             "the seeds": _ledger(verdict="supported", n_seeds=12),
             "the quantity": _ledger(verdict="supported", quantity="log rel"),
             "the rule": _ledger(verdict="supported", margin=0.18),
             "the quantity, the seeds": _ledger(effect=0.4, quantity="log rel", n_seeds=3)}
    for reason, b in cases.items():
        diff = compare.compare(a, b)
        assert list(diff["why"]) == [reason], reason
        assert f"why: {reason}" in compare.text(diff, "A", "B")
    added = compare.compare(a, pd.concat([a, _ledger(claim_id="lipschitz")]))
    assert list(added["why"]) == ["the declaration"]


def test_the_changed_verdict_list_keeps_verdict_changes_only():
    a = pd.concat([_ledger(), _ledger(claim_id="lipschitz")])
    b = pd.concat([_ledger(verdict="supported", n_seeds=12), _ledger(claim_id="lipschitz",
                                                                     effect=-0.7)])
    changed = compare.verdict_changes(compare.compare(a, b))
    assert list(changed["claim_id"]) == ["grad_pred"]
    md = compare.markdown(changed)
    assert md.startswith("- `grad_pred` [digits: batchnorm vs none]: undecided -> supported "
                         "(after Holm: undecided -> undecided)")
    assert "why: the seeds" in md


def test_a_row_whose_own_statistics_are_equal_moved_with_its_holm_family():
    """Only the adjusted verdict moved (other rows of the family changed their p-values): the
    reason is Holm's family, not "the data"; a moved p-value or effect is the data again."""
    a = _ledger(p_value=0.004, p_adjusted=0.06, adjusted_verdict="undecided")
    b = _ledger(p_value=0.004, p_adjusted=0.02, adjusted_verdict="supported")
    assert list(compare.compare(a, b)["why"]) == ["Holm's family"]
    c = _ledger(p_value=0.001, p_adjusted=0.02, adjusted_verdict="supported", effect=-0.7)
    assert list(compare.compare(a, c)["why"]) == ["the data"]
