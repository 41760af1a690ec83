"""Partition density's chunks sized from a memory budget: every pass holds at most the budget's
activations, the counts equal an unchunked run's, and a CIFAR-sized model gets small chunks."""

from __future__ import annotations

import pytest
import torch
from torch.autograd import forward_ad

from bnstudy.measures.partition import budget
from bnstudy.measures.partition import compute as pdm
from bnstudy.networks import memory, models

MB = 2**20


def _pass_bytes(model_type):
    """Global hooks summing, per pass of a ``model_type`` network (one started by its forward,
    complete or stopped early), the bytes of every leaf module's output (primal and forward-mode
    tangent); returns (list of sums, the hooks' handles)."""
    sums = [0]

    def start(module, _inp):
        if isinstance(module, model_type):
            sums.append(0)

    def hook(module, _inp, out):
        if not list(module.children()) and isinstance(out, torch.Tensor):
            primal, tangent = forward_ad.unpack_dual(out)
            sums[-1] += primal.numel() * primal.element_size()
            if tangent is not None:
                sums[-1] += tangent.numel() * tangent.element_size()

    mod = torch.nn.modules.module
    return sums, (mod.register_module_forward_pre_hook(start),
                  mod.register_module_forward_hook(hook))


@pytest.mark.parametrize("method", ["distance", "polytope"])
def test_every_pass_fits_the_budget_and_counts_equal_an_unchunked_run(digits, method):
    torch.manual_seed(0)
    net = models.build_model({"arch": "vgg", "channels": [4, "M", 6], "slope": 0.1},
                             "batchnorm", (1, 8, 8), 10).train()
    opts = {"n_points": 10, "radii": [0.1, 0.5], "method": method, "n_vertices": 8}
    small = 0.25  # MiB: a few rows of this net per pass
    rows = budget.chunk_rows(net, 64, small, 65536)
    assert 1 < rows < 64 and rows * budget.row_bytes(net, 64) <= small * MB
    sums, handles = _pass_bytes(type(net))
    try:
        chunked = pdm.measure(net, digits, {**opts, "memory_budget_mb": small})
    finally:
        for h in handles:
            h.remove()
    # the frozen-BN pass over the training set and the counting passes, all chunked
    assert len(sums) > len(digits.x_train) // rows and max(sums) <= small * MB
    whole = pdm.measure(net, digits, {**opts, "memory_budget_mb": 1e6, "chunk_rows": 10**9})
    assert chunked == whole


def test_cifar_sized_resnet9_gets_chunks_within_the_default_budget():
    """The old fixed 65536 rows of 3x32x32 images through a ResNet9 hold ~2 TB by this
    estimate; the default budget (2048 MiB) gives a few dozen rows."""
    net = models.build_model({"arch": "resnet9"}, "batchnorm", (3, 32, 32), 10)
    per_row = budget.row_bytes(net, 3072)
    rows = budget.chunk_rows(net, 3072, 2048, 65536)
    assert rows * per_row <= 2048 * MB < (rows + 1) * per_row
    assert 65536 * per_row > 100 * 2**30 and 1 <= rows < 1000
    assert budget.chunk_rows(net, 3072, 1e9, 500) == 500  # chunk_rows caps it


def test_bad_budget_is_named():
    for bad in (0, -1.0, -1, float("inf"), float("nan"), "1GB", "big", True):
        with pytest.raises(ValueError, match=r"memory_budget_mb=.*\"auto\" or a positive"):
            pdm.Options.parse({"memory_budget_mb": bad})


def test_auto_on_the_cpu_chunks_and_counts_as_a_stated_2048(digits, caplog):
    """The default budget is "auto"; on the CPU it is 2048 MiB: the CIFAR ResNet9's chunks and
    the measure's rows are exactly those of ``memory_budget_mb: 2048``."""
    assert pdm.Options.parse({}).memory_budget_mb == "auto"
    cpu = torch.device("cpu")
    assert memory.budget_mb("auto", cpu) == 2048.0
    cifar = models.build_model({"arch": "resnet9", "width": 64}, "batchnorm", (3, 32, 32), 10)
    auto = budget.chunk_rows(cifar, 3072, memory.budget_mb("auto", cpu), 65536)
    assert auto == budget.chunk_rows(cifar, 3072, 2048, 65536) < 65536
    torch.manual_seed(0)
    net = models.build_model({"arch": "vgg", "channels": [4, "M", 6]}, "batchnorm", (1, 8, 8),
                             10).train()
    opts = {"n_points": 10, "radii": [0.1, 0.5]}
    passes = []
    for section in (opts, {**opts, "memory_budget_mb": 2048}):
        caplog.clear()
        with caplog.at_level("INFO", logger="bnstudy"):
            passes.append((pdm.measure(net, digits, section),
                           [r.getMessage().rsplit(",", 1)[0] for r in caplog.records
                            if "forward pass(es)" in r.getMessage()]))
    assert passes[0] == passes[1] and "budget 2048 MiB" in passes[0][1][0]


def test_rows_record_whether_the_inputs_were_standardized(digits, star):
    from bnstudy import data

    torch.manual_seed(0)
    opts = {"n_points": 4, "radii": [0.1], "maps": False}
    conv = models.build_model({"arch": "vgg", "channels": [4, "M", 6]}, "batchnorm", (1, 8, 8),
                              10).train()
    raw = data.make("digits", {"standardize": False})
    for ds, want in ((digits, True), (raw, False)):
        rows = pdm.measure(conv, ds, opts)["partition_density"]
        assert {r["input_standardized"] for r in rows} == {want}
    mlp = models.build_model({"arch": "mlp", "depth": 2, "width": 8}, "batchnorm", (2,), 2)
    rows = pdm.measure(mlp.train(), star, opts)["partition_density"]
    assert {r["input_standardized"] for r in rows} == {False}  # not an image set
