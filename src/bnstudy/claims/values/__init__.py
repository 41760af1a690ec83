"""A claim's per-run values (the second room of :mod:`bnstudy.claims`): the metrics that reduce
a table to one value per run, the training stage they are read at, and where their noise comes
from. Imports from :mod:`bnstudy.claims.declare` at most."""
