"""The claims ledger, laid out by the stages one row passes through, top to bottom; a module
imports only from its own room or an earlier one, never back up (``tests/test_layout.py``):

1. :mod:`bnstudy.claims.declare`: what a claim declares before any data: the claim itself
   (``claim``), its paper protocols (``protocols``), the experiments a contrast pairs
   (``contrast``) and the tables the claims read (``reads``);
2. :mod:`bnstudy.claims.values`: the per-run values: the metrics (``metrics``, ``jitter``), the
   training stage they are read at (``stage``) and where their noise comes from (``variance``);
3. :mod:`bnstudy.claims.decide`: the decision: the outcomes (``outcomes``), the rule and its
   interval (``rules``, ``robust``, ``skew``), the planned looks (``sequential``), Holm over
   the study's family (``multiplicity``), the seeds needed (``power``), the rule's simulation
   (``simulation``) and Dannemann-Junike's exact row (``dannemann``);
4. :mod:`bnstudy.claims.say`: the row in words: its effect and rule (``words``), what is shown
   beside it (``beside``), its notes and role (``annotate``), its departures from the paper's
   protocol (``deviations``), the Markdown ledgers (``markdown``) and ``compare``.

At the top, above the rooms: :mod:`bnstudy.claims.declared` lists every claim (it names each
one's metric from ``values`` and protocol from ``declare``), :mod:`bnstudy.claims.pairing` takes
one claim's paired values through ``decide`` and ``say`` into its rows, and
:mod:`bnstudy.claims.ledger` runs every claim into the study's ledger.
"""
