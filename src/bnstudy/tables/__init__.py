"""The study's tables after the measures: :mod:`.layout` (where each run's and block's files
live), :mod:`.aggregation` (the study-wide tables, sweep axes as columns) and :mod:`.intervals`
(the Student-t interval over seeds that the report, the figures and the ledger share).
"""
