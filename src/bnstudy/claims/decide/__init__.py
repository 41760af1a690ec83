"""The decision on a row's paired values (the third room of :mod:`bnstudy.claims`): the
outcomes, the rule and its interval, the planned looks, Holm over the study's family, the seeds
needed, and the simulation that checks the rule. Imports from the earlier rooms at most."""
