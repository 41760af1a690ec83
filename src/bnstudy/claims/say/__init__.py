"""The row in words (the last room of :mod:`bnstudy.claims`): its effect and rule in words, what
is shown beside it, its notes and role, its departures from the paper's protocol, the Markdown
ledgers and ``compare``. Imports from any earlier room."""
