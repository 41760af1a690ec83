"""``map_seeds``: the 2-D map and boundary rows of ``partition_density`` and ``bn_jitter`` for the
seeds a study names only (the figures draw the smallest seed); every run's summary rows are the
same as with ``"all"``."""

from __future__ import annotations

import pandas as pd
import pytest
import torch
from specs import make_spec

from bnstudy.config import loader, measure_config
from bnstudy.measures.jitter import compute as jitter
from bnstudy.measures.jitter.options import Options as JitterOptions
from bnstudy.measures.partition import compute as partition
from bnstudy.measures.partition.options import Options as PartitionOptions
from bnstudy.train import loop as training

CPU = torch.device("cpu")
PARTITION = {"n_points": 5, "radii": [0.1], "map_resolution": 4, "boundary_resolution": 12}
JITTER = {"batch_sizes": [8], "n_batches": 4, "realizations": 3, "grid_resolution": 8,
          "map_resolution": 4, "map_realizations": 2, "boundary_resolution": 10}
MEASURES = [(partition, PARTITION, "partition_density",
             ("partition_density_maps", "partition_boundaries")),
            (jitter, JITTER, "bn_jitter", ("bn_jitter_boundary",))]


def _run(star, seed: int):
    spec = make_spec("batchnorm", seed=seed, model={"arch": "mlp", "depth": 2, "width": 6},
                     training={"lr": 0.05, "batch_size": 16, "steps": 4, "checkpoints": [0, 2]})
    return training.train(spec, star, "cpu")


@pytest.mark.parametrize(("measure", "base", "summary", "maps"), MEASURES)
def test_maps_only_for_the_named_seeds_and_summaries_unchanged(star, measure, base, summary,
                                                               maps):
    for seed in (0, 1):
        run = _run(star, seed)
        every = measure.run(run, star, {**base, "map_seeds": "all"}, CPU)
        some = measure.run(run, star, {**base, "map_seeds": [0, 5]}, CPU)
        pd.testing.assert_frame_equal(pd.DataFrame(some[summary]),
                                      pd.DataFrame(every[summary]))
        for table in maps:
            assert len(every[table]) > 0, table
            if seed == 0:  # named: the same rows as "all"
                pd.testing.assert_frame_equal(pd.DataFrame(some[table]),
                                              pd.DataFrame(every[table]))
            else:  # not named: no map, boundary or data rows
                assert some[table] == [], table


@pytest.mark.parametrize("options", [PartitionOptions, JitterOptions])
@pytest.mark.parametrize("bad", [[], [-1], [1, 1], [0.5], "first", 3, [True]])
def test_bad_map_seeds_are_refused_naming_the_value(options, bad):
    with pytest.raises(ValueError, match=r"map_seeds=.*need \"all\" or a non-empty list"):
        options.parse({"map_seeds": bad})


@pytest.mark.parametrize("options", [PartitionOptions, JitterOptions])
def test_map_seeds_default_is_all_and_lists_are_kept(options):
    assert options.parse({}).map_seeds == "all"
    assert list(options.parse({"map_seeds": [2, 0]}).map_seeds) == [2, 0]


def test_a_study_whose_experiment_has_none_of_the_map_seeds_is_refused():
    mopts = {"partition_density": PartitionOptions.parse({"map_seeds": [7]})}
    e = {"model": "mlp_star", "seeds": [0, 1, 2]}
    with pytest.raises(loader.ConfigError, match=r"partition_density.map_seeds: \[7\] names "
                       r"none of experiment 'star''s seeds \[0, 1, 2\]"):
        measure_config.check_experiment("star", e, "classification", mopts, plain=None)
    ok = {"partition_density": PartitionOptions.parse({"map_seeds": [2]})}
    measure_config.check_experiment("star", e, "classification", ok, plain=None)
