"""The measures' "auto" memory budget: a share of a CUDA card's free memory (so one config fits a
24 GB and an 80 GB card), 2048 MiB on the CPU (chunks and numbers as a stated 2048), BN jitter's
chunks sized from it without changing its numbers, machine-independent cluster requests, and
bad values named."""

from __future__ import annotations

import math

import pytest
import torch

from bnstudy import data, model_size
from bnstudy.measures.jitter import budget as jitter_budget
from bnstudy.measures.jitter import compute as bj
from bnstudy.measures.partition import budget as partition_budget
from bnstudy.measures.partition import compute as pdm
from bnstudy.networks import layer_stats, memory, models
from bnstudy.planning import resources

MB = 2**20
GB = 10**9
CIFAR = (3, 32, 32)
# (free as the driver reports it, reserved by torch's cache, allocated) of two fake cards
CARDS = {"24GB": (20 * GB, 2 * GB, int(1.5 * GB)), "80GB": (75 * GB, 3 * GB, 1 * GB)}


def _fake_card(monkeypatch, free, reserved, allocated):
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (free, 80 * GB))
    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda device=None: reserved)
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda device=None: allocated)


@pytest.fixture(scope="module")
def resnet9():
    torch.manual_seed(0)
    return models.build_model({"arch": "resnet9", "width": 64}, "batchnorm", CIFAR, 10)


def test_auto_on_a_cuda_card_is_a_share_of_its_free_memory_and_the_chunks_fit(monkeypatch,
                                                                              resnet9):
    cuda = torch.device("cuda")
    got = {}
    for card, (free, reserved, allocated) in CARDS.items():
        _fake_card(monkeypatch, free, reserved, allocated)
        mb = memory.budget_mb("auto", cuda)
        free_and_cached = free + reserved - allocated
        assert mb * MB == pytest.approx(memory.CUDA_BUDGET_FRACTION * free_and_cached)
        # the suspended forwards' default budget is the same definition
        assert layer_stats.default_budget(cuda) == int(mb * MB)
        rows = {}
        for name, per_row, chunk in (
                ("partition", partition_budget.row_bytes(resnet9, math.prod(CIFAR)),
                 partition_budget.chunk_rows(resnet9, math.prod(CIFAR), mb, 65536)),
                ("jitter", jitter_budget.row_bytes(resnet9, CIFAR),
                 jitter_budget.chunk_rows(resnet9, CIFAR, mb, 65536))):
            assert 1 <= chunk < 65536 and chunk * per_row <= mb * MB < (chunk + 1) * per_row
            rows[name] = chunk
        got[card] = mb, rows
    (mb24, rows24), (mb80, rows80) = got["24GB"], got["80GB"]
    assert mb80 > 3 * mb24 > 3 * memory.CPU_BUDGET_MB
    assert all(rows80[k] > rows24[k] for k in rows24), (rows24, rows80)
    # a stated number is itself on any device
    assert memory.budget_mb(512, torch.device("cuda")) == 512.0


def test_auto_on_the_cpu_is_the_stated_budget():
    assert memory.budget_mb("auto", torch.device("cpu")) == memory.CPU_BUDGET_MB == 2048.0
    assert memory.planning_mb("auto") == 2048.0 and memory.planning_mb(100) == 100.0


def test_jitter_row_cost_counts_the_float64_copies_of_conv_maps(resnet9):
    total, largest = memory.activation_bytes(resnet9, CIFAR)
    assert largest >= 4 * 64 * 32 * 32  # the first conv's map, float32
    assert jitter_budget.row_bytes(resnet9, CIFAR) == total + jitter_budget.GRAB_COPIES * 2 * (
        largest)


def _forward_sizes(model_type):
    """Global hooks recording the rows of every forward of a ``model_type`` network."""
    sizes: list[int] = []

    def pre(module, inp):
        if isinstance(module, model_type):
            sizes.append(len(inp[0]))

    return sizes, torch.nn.modules.module.register_module_forward_pre_hook(pre)


def test_jitter_under_a_small_budget_has_the_same_numbers_in_more_smaller_forwards():
    ds = data.make("star2d", {"n_train": 200, "n_test": 50, "seed": 0})
    torch.manual_seed(0)
    net = models.build_model({"arch": "mlp", "depth": 2, "width": 8}, "batchnorm", (2,), 2)
    opts = {"batch_sizes": [8], "n_batches": 10, "realizations": 3, "grid_resolution": 20,
            "map_resolution": 5, "map_realizations": 1, "boundary_resolution": 20}
    target = 16
    small = target * jitter_budget.row_bytes(net, (2,)) / MB
    assert jitter_budget.chunk_rows(net, (2,), small, 65536) == target
    out, sizes = {}, {}
    for name, mb in (("small", small), ("huge", 1e6)):
        sizes[name], handle = _forward_sizes(type(net))
        try:
            out[name] = bj.measure(net.train(), ds, {**opts, "memory_budget_mb": mb})
        finally:
            handle.remove()
    # the population pass (200 rows) and the grids (400 points) in forwards of <= 16 rows
    assert max(sizes["small"]) <= target < 200 <= max(sizes["huge"])
    assert len(sizes["small"]) > len(sizes["huge"]) + 400 // target
    for table in ("bn_jitter", "bn_jitter_boundary"):
        a, b = out["small"][table], out["huge"][table]
        assert len(a) == len(b) > 0
        for ra, rb in zip(a, b, strict=True):
            assert ra.keys() == rb.keys()
            for k, v in ra.items():  # the moments' float64 sums differ only in rounding
                if isinstance(v, float) and not math.isnan(v):
                    assert v == pytest.approx(rb[k], rel=1e-9, abs=1e-15), (table, k)
                else:
                    assert v == rb[k] or (v != v and rb[k] != rb[k]), (table, k)


def test_jitter_auto_on_the_cpu_equals_a_stated_2048(star):
    torch.manual_seed(0)
    net = models.build_model({"arch": "mlp", "depth": 2, "width": 8}, "batchnorm", (2,), 2)
    opts = {"batch_sizes": [8], "n_batches": 5, "realizations": 2, "grid_resolution": 10,
            "map_resolution": 4, "map_realizations": 1, "boundary_resolution": 10}
    assert bj.Options.parse({}).memory_budget_mb == "auto"
    auto = bj.measure(net.train(), star, opts)
    stated = bj.measure(net.train(), star, {**opts, "memory_budget_mb": 2048})
    assert repr(auto) == repr(stated)  # exactly, NaNs included


@pytest.mark.parametrize("options", [pdm.Options, bj.Options])
@pytest.mark.parametrize("bad", ["big", -1, 0, True, float("nan"), float("inf"), "Auto", None])
def test_bad_budgets_name_the_value_and_the_choices(options, bad):
    with pytest.raises(ValueError) as err:
        options.parse({"memory_budget_mb": bad})
    msg = str(err.value)
    assert f"{options.SECTION}.memory_budget_mb={bad!r}" in msg
    assert '"auto" or a positive number' in msg
    with pytest.raises(ValueError, match="memory_budget_mb=.*auto"):
        memory.check(bad)


@pytest.mark.parametrize("name, options, n_train", [("partition_density", pdm.Options, 200),
                                                    ("bn_jitter", bj.Options, 2000)])
def test_cluster_requests_take_auto_as_the_cpu_budget_on_any_machine(monkeypatch, name,
                                                                     options, n_train):
    size = model_size.size({"arch": "resnet9", "width": 64}, CIFAR, 10)
    training = {"steps": 100, "batch_size": 128, "checkpoints": [0, 100]}

    def device_bytes(section):  # the chunked passes' memory dominates, not evaluation's
        return resources.measure_work(name, options.parse(section), size, n_train, 50,
                                      training).device_bytes

    auto = device_bytes({})
    assert auto == device_bytes({"memory_budget_mb": 2048}) > device_bytes(
        {"memory_budget_mb": 256})
    assert device_bytes({"memory_budget_mb": 10**6}) > auto  # a stated budget is taken as is
    _fake_card(monkeypatch, *CARDS["80GB"])  # the planning machine's card changes nothing
    assert device_bytes({}) == auto
