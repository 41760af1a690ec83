"""A study's config: reading it, expanding it, checking it (one import path per concept).

- :mod:`.loader`: config files read strictly (duplicate keys, YAML errors with line and column),
  ``extends:`` chains, ``--config`` overrides merged, the JSON schema (:data:`.loader.SCHEMA`,
  ``schema.yaml`` shipped with the package; ``workflow/schemas/config.schema.yaml`` links to it)
  and :class:`.loader.ConfigError`;
- :mod:`.sweeps`, :mod:`.sweep_experiments`, :mod:`.sweep_checks`: sweep axes expanded into the
  flat config, and the axes that become table columns;
- :mod:`.study`: :func:`.study.load` (files, overrides, sweeps) and :func:`.study.check` (every
  check, before any job), with :mod:`.setup_checks` (results directory, devices, datasets,
  plots) and :mod:`.model_checks` (the models an experiment's normalizers need).
"""
