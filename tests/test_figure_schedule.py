"""Per-experiment figures are scheduled only when the options give their table rows."""

import harness
import pytest

from bnstudy import plots
from bnstudy.measures.partition import compute as pdm
from bnstudy.plots import partition_density as pdplots


def test_partition_maps_need_maps_on():
    fam = plots.get("partition_density_maps")
    assert fam.in_experiment is pdplots.maps_measured
    assert not fam.in_experiment({"partition_density": {"maps": False}}, "star")
    assert fam.in_experiment({"partition_density": {"maps": True}}, "star")
    # the default (an empty section or none at all) matches the measure's default
    assert pdm.Options().maps is True
    assert fam.in_experiment({"partition_density": {}}, "star")
    assert fam.in_experiment({"partition_density": None}, "star")


def test_only_families_with_nothing_to_show_somewhere_declare_a_predicate():
    """A family declares ``in_experiment`` only where an experiment can leave it nothing to show:
    the maps and exact boundaries (``maps: false``; a linear network has no partition), the
    partition-density figures of a linear network (its rows are all not applicable), the
    activation distributions (``activation_units: 0``). Every other experiment-scope family's
    table has rows whatever the options (bn_jitter's boundary table keeps its data rows and the
    disagreement grid for map_realizations: 0; smoothness without the Hessian keeps NaN
    columns; ics layers, teacher_student checkpoints and point_sets only select rows)."""
    plots.load_all()
    declared = {n for n, f in plots.FAMILIES.items() if f.in_experiment is not None}
    assert declared == {"partition_density_maps", "partition_boundaries",
                        "partition_density_steps", "partition_density_sets",
                        "partition_density_layers", "ics_activations"}


@pytest.mark.workflow
def test_dry_run_schedules_no_map_figure_without_maps(tmp_path):
    wd = harness.copy_project(tmp_path / "wf")
    outs = {}
    for maps in (True, False):
        cfg = harness.tiny_config(wd, results="results")
        cfg["partition_density"] = {**cfg["partition_density"], "maps": maps}
        harness.write_config(wd / f"maps_{maps}.yaml", cfg)
        out = harness.snakemake(wd, "-n", "--configfile", f"maps_{maps}.yaml")
        outs[maps] = out.stdout + out.stderr
        jobs = harness.planned_jobs(outs[maps])
        # the family's one job draws the map figure of every experiment with 2-D inputs
        assert [j["rule"] == "plot_partition_density_maps" for j in jobs].count(True) == int(maps)
    assert "figures/star/partition_density_maps.png" in outs[True]
    assert "figures/star/partition_density_maps.png" not in outs[False]
    # the table is still made (the measure writes it, empty), and the other figures stay
    for text in outs.values():
        assert "tables/partition_density_maps.parquet" in text
        assert "figures/star/partition_density_steps.png" in text
