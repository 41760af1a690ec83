"""Planning a study: its jobs (:mod:`.plan` with :mod:`.figures` and :mod:`.job_resources`), their
code versions, argument files and cluster requests, the study's cost and job counts, what a
config can name (:mod:`.catalog`) and the one-study-per-results-directory lock."""
