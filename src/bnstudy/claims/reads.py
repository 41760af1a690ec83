"""The tables the claims ledger reads, declared without importing it (pandas, scipy): the
workflow's claims job and each replication round's ledger take these tables as inputs and no
others, so a study's largest tables (partition boundaries and maps, activation quantiles, probe
curves: figures only) are not read, sorted and held in memory by every round.

``tests/test_claims.py`` checks that this is exactly what :func:`bnstudy.claims.ledger.evaluate`
reads: each claim's table, the training table (seed counts, collapse and warm-up notes) and the
Dannemann analysis' table.
"""

TABLES = ("bn_jitter", "dannemann", "generalization", "ics", "partition_density", "smoothness",
          "teacher_student", "training")
