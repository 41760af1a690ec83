"""population_norm's default options, torch-free: the registry entry
(:mod:`bnstudy.networks.norms.population`) registers them and the ledger's deviations
(:mod:`bnstudy.claims.say.deviations`) read them for a config that does not state its own."""

POPULATION_OPTIONS = {"n_samples": 1024, "refresh_every": 1, "zeta": "eq3",
                      "zeta_batch_size": None, "zeta_probes": 4, "eps": 1e-5}
