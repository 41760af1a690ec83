"""What a claim declares before any data (the first room of :mod:`bnstudy.claims`): the claim,
its paper protocols, the experiments a contrast pairs, the tables the claims read. Imports
nothing from the later rooms."""
