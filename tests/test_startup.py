"""Start-up cost: table-only jobs never import torch, and the figure registry (read when the
workflow parses the Snakefile) imports neither matplotlib nor seaborn until a figure is drawn.

The import checks run in a fresh interpreter (``python -c``), since this test process has
imported everything already. One figure family's figures drawn in one process (``render_all``)
are byte for byte those drawn one per process (``render``).
"""

import subprocess
import sys
import textwrap

import numpy as np
import pandas as pd
import pytest

from bnstudy import io, lazy, plots


def _fresh(code: str) -> None:
    """Run ``code`` in a fresh interpreter; it fails the test by a failed assert."""
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]


@pytest.mark.parametrize("module", ["bnstudy.io", "bnstudy.tables.aggregation",
                                    "bnstudy.tables.intervals", "bnstudy.claims.ledger",
                                    "bnstudy.report.build", "bnstudy.plots"])
def test_table_only_modules_do_not_import_torch(module):
    _fresh(f"""
        import sys
        import {module}
        import bnstudy.plots
        bnstudy.plots.load_all()
        assert "torch" not in sys.modules, "torch imported by {module}"
    """)


def test_figure_registry_imports_no_plotting_library_until_a_figure_is_drawn():
    _fresh("""
        import sys
        from bnstudy import plots
        plots.load_all()
        assert len(plots.FAMILIES) > 10 and plots.MODULES
        loaded = [m for m in ("matplotlib", "matplotlib.pyplot", "seaborn", "scipy.stats",
                              "torch") if m in sys.modules]
        assert not loaded, loaded
        plots.figure()  # the first use imports matplotlib, with the Agg backend
        import matplotlib
        assert "seaborn" not in sys.modules
        assert matplotlib.get_backend().lower() == "agg", matplotlib.get_backend()
    """)


@pytest.mark.parametrize("code, heavy", [
    # the measures' registry, read at every Snakemake start: no scipy (a third of a second)
    ("from bnstudy import measures; assert measures.REGISTRY", ("scipy.special", "scipy")),
    # an argument-file job (one small process each, 32 in the tiny study): no pandas, pyarrow
    ("from bnstudy.planning.arguments import write_arguments", ("pandas", "pyarrow")),
])
def test_what_every_start_reads_imports_no_heavy_library(code, heavy):
    _fresh(f"""
        import sys
        {code}
        loaded = [m for m in {heavy!r} if m in sys.modules]
        assert not loaded, loaded
    """)


def test_aggregate_and_provenance_do_not_import_torch(tmp_path):
    df = pd.DataFrame({"experiment": ["e"], "dataset": ["d"], "model": ["m"], "norm": ["none"],
                       "seed": [0], "step": [0], "loss": [1.0]})
    for seed in (0, 1):
        io.write_table(df.assign(seed=seed), tmp_path / f"run{seed}.parquet", {"config_hash": "h"})
    _fresh(f"""
        import sys
        from importlib import metadata
        from bnstudy import io
        from bnstudy.tables import aggregation
        out = aggregation.aggregate([{str(tmp_path / "run0.parquet")!r},
                                {str(tmp_path / "run1.parquet")!r}],
                               {str(tmp_path / "all.parquet")!r})
        assert len(out) == 2
        assert "torch" not in sys.modules, "aggregate imported torch"
        version = io.read_provenance({str(tmp_path / "all.parquet")!r})["torch_version"]
        assert version == metadata.version("torch"), version
        assert "torch" not in sys.modules
    """)


def test_torch_version_without_importing_torch_is_torch_s_own():
    _fresh("""
        import sys
        from bnstudy import io
        before = io.torch_version()
        assert "torch" not in sys.modules
        import torch
        assert before == torch.__version__ == io.torch_version(), (before, torch.__version__)
    """)


def test_lazy_module_imports_on_first_use_and_rejects_bad_names():
    m = lazy.module("json")
    assert "not imported yet" in repr(m)
    assert m.dumps([1]) == "[1]"
    assert "imported" in repr(m) and "not" not in repr(m)
    with pytest.raises(AttributeError, match="read-only"):
        m.dumps = None
    for bad in ("", "matplotlib..pyplot", "1abc", None):
        with pytest.raises(ValueError, match="dotted module name"):
            lazy.module(bad)


def _training(experiments=("e1", "e2")):
    rng = np.random.default_rng(0)
    rows = []
    for i, experiment in enumerate(experiments):
        for norm in ("none", "batchnorm"):
            for seed in range(3):
                for step in (0, 10, 20):
                    for split in ("train", "test"):
                        rows.append({"experiment": experiment, "dataset": "d", "model": "m",
                                     "norm": norm, "seed": seed, "step": step, "split": split,
                                     "lr": 0.1 * (i + 1), "diverged": False,
                                     # a loss is never negative (bnstudy.tables.ranges)
                                     "loss": float(abs((1 + i) / (1 + step)
                                                       + rng.normal(0, 0.1))),
                                     "accuracy": float(rng.uniform(0.5, 1.0))})
    return pd.DataFrame(rows)


def test_render_all_draws_each_figure_byte_identical_to_render(tmp_path):
    table = str(tmp_path / "training.parquet")
    io.write_table(_training(), table, {})
    options = {"dpi": 50}
    one = {e: tmp_path / f"one_{e}.png" for e in ("e1", "e2")}
    for e, out in one.items():
        plots.render("training_curves", [table], str(out), options, experiment=e)
    # another order, and the study figure of another family in between, leave no trace
    plots.render_all("lr_sweep", [table], {None: str(tmp_path / "all_study.png")}, options)
    plots.render_all("training_curves", [table],
                     {e: str(tmp_path / f"all_{e}.png") for e in ("e2", "e1")}, options)
    for e in one:
        assert (tmp_path / f"all_{e}.png").read_bytes() == one[e].read_bytes(), e
    assert one["e1"].read_bytes() != one["e2"].read_bytes()  # each drew its own experiment
    plots.render("lr_sweep", [table], str(tmp_path / "one_study.png"), options)
    assert (tmp_path / "all_study.png").read_bytes() == (tmp_path / "one_study.png").read_bytes()


def test_render_all_rejects_bad_outputs_before_drawing_any(tmp_path):
    table = str(tmp_path / "training.parquet")
    io.write_table(_training(), table, {})
    first = tmp_path / "e1.png"
    with pytest.raises(ValueError, match="no rows for experiment 'nope'"):
        plots.render_all("training_curves", [table], {"e1": str(first), "nope": "x.png"}, {})
    assert not first.exists()
    with pytest.raises(ValueError, match="drawn once for the study"):
        plots.render_all("lr_sweep", [table], {"e1": str(first)}, {})
    with pytest.raises(ValueError, match="drawn per experiment"):
        plots.render_all("training_curves", [table], {None: str(first)}, {})
    with pytest.raises(ValueError, match="share an output path"):
        plots.render_all("training_curves", [table], {"e1": "a.png", "e2": "a.png"}, {})
    with pytest.raises(ValueError, match="non-empty mapping"):
        plots.render_all("training_curves", [table], {}, {})
    with pytest.raises(ValueError, match="unknown figure family 'nope'"):
        plots.render_all("nope", [table], {"e1": str(first)}, {})
    assert not first.exists()


def test_a_served_jobs_optimizer_imports_nothing_the_server_has_not():
    """torch.optim's first step imports torch._dynamo (about 1.3 s of CPU per process); the fork
    server imports it once (PRELOAD), so a served training job or a checkpoint's replayed update
    (the ICS measure's) imports none of that (dynamo, sympy) for its optimizer
    (benchmarks/bench_sgd.py). The dannemann analysis' gradient descent needs no optimizer."""
    _fresh("""
        import importlib, sys
        import numpy as np
        from bnstudy.forkserver import PRELOAD
        assert "torch._dynamo" in PRELOAD
        for name in PRELOAD:
            if name.split(".")[0] == "torch":
                importlib.import_module(name)
        from bnstudy import data
        from bnstudy.theory import dannemann_example
        from bnstudy.train import checkpoints, loop
        ds = data.make("star2d", {"n_train": 64, "n_test": 32, "seed": 0})
        spec = {"experiment": "t", "dataset": "star2d", "model": "m", "norm": "batchnorm",
                "seed": 0, "model_config": {"arch": "mlp", "depth": 3, "width": 16},
                "training": {"lr": 0.05, "momentum": 0.9, "weight_decay": 1e-4,
                             "batch_size": 16, "steps": 6, "eval_every": 3,
                             "checkpoints": [0, 3]}}
        before = set(sys.modules)
        run = loop.train(spec, ds, "cpu")
        restored = checkpoints.restore(run, 1, ds)
        restored.optimizer.step()
        assert np.isfinite(run["history"][-1]["loss"])
        heavy = ("torch._dynamo", "torch._inductor", "torch.fx", "sympy")  # the 1.3 CPU-s
        new = sorted(m for m in set(sys.modules) - before if m.startswith(heavy))
        assert not new, new
        dannemann_example.gradient_descent(np.array([[3.0, 1.0]]), "bn", 20, 0.1, 1e-12, 10)
    """)
    _fresh("""
        import sys
        import numpy as np
        from bnstudy.theory import dannemann_example
        dannemann_example.gradient_descent(np.array([[3.0, 1.0]]), "bn", 20, 0.1, 1e-12, 10)
        assert "torch._dynamo" not in sys.modules, "torch._dynamo imported"
    """)
