"""What each job asks a cluster scheduler for, estimated from the study: GPU, memory, time.

A flat per-rule request (2 GB, 30 minutes, no GPU) fits the default study and starves the
paper-scale ones: one partition-density checkpoint of the CIFAR ResNet9 is 300 points x 3072
forward-mode rows, hours on a CPU core. So each job's request follows from the work it does,
counted in *sample passes* (one input through one forward; a forward+backward is 3) through its
model (:mod:`bnstudy.model_size`: FLOPs, bytes and activations per sample), plus per-call
overheads and dense float64 algebra. The work functions below state, per job kind, what it runs
(the training loop's steps and evaluations; each measure's passes from its options); a measure
this module does not know gets :func:`generic_work` (override it with ``resources:``).

:func:`request` turns work into ``{"gpu", "mem_mb", "runtime"}``: a job asks for a GPU when the
study's device is not ``cpu`` and its CPU time is above :data:`GPU_ABOVE_CPU_MINUTES` (small jobs
never do); runtime and memory get a :data:`MARGIN`, a floor and a cap. The numbers are
estimates, not measurements of the cluster: the config's ``resources:`` section replaces any of
them per rule (:func:`check` validates it). Importing this module does not import torch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from bnstudy.config.resource_checks import KEYS
from bnstudy.networks import memory

# -- throughput assumptions --------------------------------------------------------------------
# One CPU thread: 94 GFLOP/s was measured here for a ResNet9 forward (batch 16, one thread, 2.8x
# that for forward+backward, 2.7x for a forward-mode pass); cluster cores and thin layers get
# less. Memory traffic bounds the matrix-vector work (Luo's full-batch GD on a 12288 x 4096
# matrix: ~0.25 s a step measured on one core, 7 ms of FLOPs).
CPU_FLOPS = 40e9  # FLOP/s of one thread (float32)
CPU_BYTES = 2e9  # bytes/s one thread streams through memory
CPU_FP64 = 10e9  # FLOP/s of one thread in float64 LAPACK (an SVD: Luo's ERM, ~2 min measured)
THREAD_EFFICIENCY = 0.5  # each thread beyond the first adds half a thread
# One GPU, float32 with TF32 off (deterministic kernels, README "Running on a GPU"): half the
# 20 TFLOP/s the paper studies' cost notes assume for these small convolutions.
GPU_FLOPS = 10e12
GPU_BYTES = 1e12
GPU_FP64 = 1e12
CALL_SECONDS = 3e-3  # Python and kernel launches per pass or step (Luo's SGD: 1-2.5 ms/step)
START_SECONDS = 30  # interpreter, imports, dataset and checkpoint loading of a job
GPU_START_SECONDS = 30  # CUDA initialisation
# Passes: a forward+backward is 3 forwards, a forward-mode (JVP) pass 3, a Hessian-vector
# product (double backward) 6; population normalization's refresh (a pass plus a covariance
# per layer) about 25 per sample (luo_paper.yaml: a refresh of 10k images ~ 200 training steps,
# 3x that since issue 18).
FORWARD_BACKWARD, JVP, HVP, REFRESH = 3, 3, 6, 25
EVAL_CHUNK = 4096  # rows per evaluation pass (bnstudy.train.evaluation)
# -- memory --------------------------------------------------------------------------------------
BASE_MB = 600  # interpreter, torch, numpy, pandas
GPU_HOST_MB = 1500  # host memory of a CUDA context
DATA_COPIES = 3  # the .npz arrays, float32 tensors, a device or standardized copy
# -- the request ---------------------------------------------------------------------------------
GPU_ABOVE_CPU_MINUTES = 60  # a job whose CPU estimate is longer asks for a GPU (device not cpu)
MARGIN = 2.0  # runtime and memory asked = MARGIN x the estimate
RUNTIME_FLOOR, RUNTIME_CAP = 10, 72 * 60  # minutes
MEM_FLOOR, MEM_CAP = 1000, 128_000  # MB
MB = 2**20


@dataclass(frozen=True)
class Work:
    """A job's work: ``passes`` sample passes through a model of ``flops`` / ``nbytes`` per
    sample pass, ``calls`` passes or steps (each with :data:`CALL_SECONDS` of overhead),
    ``fp64`` float64 FLOPs, ``device_bytes`` of working memory where the passes run (the host
    for a CPU job) and ``host_bytes`` the job holds on the host besides :data:`BASE_MB`."""

    passes: float = 0.0
    flops: float = 0.0
    nbytes: float = 0.0
    calls: float = 0.0
    fp64: float = 0.0
    device_bytes: float = 0.0
    host_bytes: float = 0.0

    def times(self, n: int) -> Work:
        """``n`` runs of this work one after the other (memory is held by one at a time)."""
        return Work(self.passes * n, self.flops, self.nbytes, self.calls * n, self.fp64 * n,
                    self.device_bytes, self.host_bytes)


def _per_sample(size) -> tuple[float, float]:
    """(FLOPs, bytes) of one forward sample: the MACs, and every activation written once."""
    return 2.0 * size.macs + 4.0 * size.activations, 4.0 * (size.inputs + size.activations)


def _data_bytes(size, n_train: int, n_test: int) -> float:
    return DATA_COPIES * 4.0 * size.inputs * (n_train + n_test)


def _eval_bytes(size, n: int) -> float:
    """Peak activations of a no-grad pass over ``n`` rows (in chunks of :data:`EVAL_CHUNK`)."""
    return 3 * 4.0 * size.largest * min(n, EVAL_CHUNK)


def train_work(size, n_train: int, n_test: int, training: dict, refresh=None,
               seeds: int = 1) -> Work:
    """One training run: its steps (forward+backward of a batch), an evaluation of both splits
    every ``eval_every`` steps, population refreshes, its checkpoints held in memory; with
    ``seeds``, a block of that many runs trained together (the work of each, their activations
    and states held at once, the data once)."""
    steps, batch = training["steps"], batch_size(training, n_train)
    evals = steps // training["eval_every"] + 1
    passes = steps * batch * FORWARD_BACKWARD + evals * (n_train + n_test)
    calls = steps + evals * math.ceil((n_train + n_test) / EVAL_CHUNK)
    if refresh is not None:
        samples, every = refresh
        passes += (steps // every + 1) * min(samples, n_train) * REFRESH
        calls += steps // every + 1
    flops, nbytes = _per_sample(size)
    state = 4.0 * size.params * (3 + 2 * len(checkpoint_steps(training)))
    return Work(passes * seeds, flops, nbytes, calls * seeds, 0.0,
                seeds * max(2 * 4.0 * size.activations * batch, _eval_bytes(size, n_train)),
                _data_bytes(size, n_train, n_test) + state * seeds)


def measure_work(name: str, opts, size, n_train: int, n_test: int, training: dict) -> Work:
    """One run of measure ``name`` (typed options ``opts``) at every checkpoint it measures."""
    batch, ckpts = batch_size(training, n_train), len(checkpoint_steps(training))
    flops, nbytes = _per_sample(size)
    act = 4.0 * size.activations
    passes = calls = fp64 = device = 0.0
    evaluation = _eval_bytes(size, n_train + n_test)
    if name == "generalization":
        passes = (n_train + n_test) * (2 if opts.bn_statistics == "recomputed" else 1)
        calls, device = 2 * math.ceil((n_train + n_test) / EVAL_CHUNK), evaluation
    elif name == "partition_density":
        points = sum(min(opts.n_points, {"train": n_train, "test": n_test}.get(s, opts.n_points))
                     for s in opts.point_sets)
        frozen = {"train_set": n_train, "batch": batch}.get(opts.bn_statistics, 0)
        grid = opts.map_resolution ** 2 if opts.maps and size.inputs == 2 else 0
        if opts.method == "distance":
            rows, cost = (points + grid) * size.inputs, JVP
        else:
            rows, cost = (points * len(opts.radii) + grid) * 2 * min(opts.n_vertices // 2,
                                                                      size.inputs), 1
        passes = ckpts * (frozen + rows * cost)
        calls = ckpts * (2 + rows / EVAL_CHUNK)
        # passes of at most chunk_rows rows that fit memory_budget_mb (measures.partition.budget;
        # "auto" as the CPU budget: a request must not depend on the machine that plans it)
        row = 4 * 4.0 * (size.inputs + size.activations)
        held = min(opts.chunk_rows, max(frozen, rows)) * row
        device = max(evaluation, row,
                     min(held, memory.planning_mb(opts.memory_budget_mb) * MB))
    elif name == "ics":
        probe = min(opts.probe_size, n_train)
        passes = ckpts * ((size.layers + 1) * batch * FORWARD_BACKWARD + 2 * probe)
        calls = ckpts * (size.layers + 3)
        device = act * (3 * batch + probe)
    elif name == "smoothness":
        hvps = opts.hessian_iters if opts.hessian and (
            size.params <= opts.hessian_max_params) else 0
        passes = ckpts * batch * ((1 + opts.n_probes) * FORWARD_BACKWARD + hvps * HVP)
        calls = ckpts * (1 + opts.n_probes + hvps)
        device = act * batch * (6 if hvps else 3)
    elif name == "bn_jitter":
        measured = min(ckpts, 2) if opts.checkpoints == "first_last" else ckpts
        draws = sum(opts.n_batches * min(b, n_train) for b in opts.batch_sizes)
        grid = (opts.realizations * len(opts.batch_sizes) * opts.grid_resolution ** 2
                if size.inputs == 2 else 0)
        passes = measured * (n_train + draws) + min(measured, 2) * grid
        calls = measured * (len(opts.batch_sizes) * opts.n_batches + n_train / opts.chunk_rows)
        # forwards of at most chunk_rows rows that fit memory_budget_mb ("auto": the CPU
        # budget), each row its activations and 4 float64 copies of the widest map
        # (measures.jitter.budget)
        row = 4.0 * (size.inputs + size.activations) + 4 * 2 * 4.0 * size.largest
        held = min(opts.chunk_rows, n_train) * row
        device = max(row, min(held, memory.planning_mb(opts.memory_budget_mb) * MB))
    elif name == "teacher_student":
        measured = ckpts if opts.checkpoints == "all" else 1
        passes = measured * 3 * (n_train + n_test)
        calls, device = measured * 4, evaluation
        if opts.erm:  # one float64 SVD of the training inputs per run
            k = min(n_train, size.inputs)
            fp64 = 4.0 * n_train * size.inputs * k + 8.0 * k ** 3
            device = max(device, 3 * 8.0 * n_train * size.inputs)
    elif name == "landscape":  # measures.landscape: one pass on the sample per slice point
        sample = min(opts.sample_size, n_train)
        count = {"all": ckpts, "first": 1, "last": 1, "first_last": min(ckpts, 2), "none": 0}
        lines, grids = count[opts.checkpoints], count[opts.grid_checkpoints]
        points = (lines * (opts.line_points + opts.interpolation_points)
                  + grids * opts.grid_points ** 2)
        runs = max(opts.density_runs, 1 if opts.top_k else 0)
        lanczos = runs * opts.lanczos_steps if size.params <= opts.hessian_max_params else 0
        hvps = lines * (opts.trace_samples + lanczos) if opts.curvature else 0
        passes = sample * (points + hvps * HVP + (lines * FORWARD_BACKWARD if hvps else 0))
        calls = points + hvps + lines
        device = act * sample * (6 if hvps else 2) + 8.0 * opts.lanczos_steps * size.params
    else:
        return generic_work(size, n_train, n_test, training)
    state = 4.0 * size.params * 3 * ckpts  # the run file: weights, optimizer state, batch
    return Work(passes, flops, nbytes, calls + ckpts, fp64, device,
                _data_bytes(size, n_train, n_test) + state)


def generic_work(size, n_train: int, n_test: int, training: dict) -> Work:
    """A measure without a cost model here: three passes over both splits per checkpoint."""
    ckpts = len(checkpoint_steps(training))
    flops, nbytes = _per_sample(size)
    return Work(ckpts * 3 * (n_train + n_test), flops, nbytes,
                ckpts * 3 * math.ceil((n_train + n_test) / EVAL_CHUNK), 0.0,
                _eval_bytes(size, n_train + n_test),
                _data_bytes(size, n_train, n_test) + 12.0 * size.params * ckpts)


def data_work(inputs: int, n_train: int, n_test: int) -> Work:
    """Preparing a dataset: its arrays, a few copies at once (raw, float32, standardized)."""
    return Work(host_bytes=DATA_COPIES * 4.0 * inputs * (n_train + n_test))


def summary_work(items: int, seconds_each: float = 0.5) -> Work:
    """A table, figure, ledger or report job over ``items`` parts (seconds, small memory)."""
    return Work(calls=items * seconds_each / CALL_SECONDS)


def batch_size(training: dict, n_train: int) -> int:
    b = training.get("batch_size", 64)
    return n_train if b in (None, "full") else min(int(b), n_train)


def checkpoint_steps(training: dict) -> list[int]:
    """The checkpoint steps of a run (:meth:`bnstudy.train.config.TrainConfig.checkpoint_steps`)."""
    steps = training["steps"]
    return sorted({s for s in training.get("checkpoints", [0]) if 0 <= s <= steps} | {0, steps})


def seconds(work: Work, gpu: bool, threads: int = 1) -> float:
    """The estimated wall time of ``work`` on a GPU or on ``threads`` CPU threads."""
    if gpu:
        return (START_SECONDS + GPU_START_SECONDS + work.calls * CALL_SECONDS
                + work.passes * (work.flops / GPU_FLOPS + work.nbytes / GPU_BYTES)
                + work.fp64 / GPU_FP64)
    eff = 1 + THREAD_EFFICIENCY * (max(1, threads) - 1)
    return (START_SECONDS + work.calls * CALL_SECONDS
            + work.passes * (work.flops / (CPU_FLOPS * eff) + work.nbytes / (CPU_BYTES * eff))
            + work.fp64 / (CPU_FP64 * eff))


def request(work: Work, device: str, threads: int = 1, gpus: int = 1,
            override: dict | None = None) -> dict:
    """``{"gpu", "mem_mb", "runtime"}`` for ``work``: ``gpus`` GPUs when ``device`` is not cpu
    and the CPU estimate exceeds :data:`GPU_ABOVE_CPU_MINUTES`, else none; runtime (minutes)
    and memory (MB) the estimate on that device times :data:`MARGIN`, within floor and cap;
    each key of ``override`` (a ``resources:`` entry) replaces its estimate."""
    override = override or {}
    cpu_s = seconds(work, False, threads)
    need = device != "cpu" and cpu_s / 60 > GPU_ABOVE_CPU_MINUTES
    gpu = int(override.get("gpu", max(1, gpus) if need else 0))
    secs = seconds(work, True) if gpu else cpu_s
    mem = (BASE_MB + work.host_bytes / MB
           + (GPU_HOST_MB if gpu else work.device_bytes / MB))
    out = {"gpu": gpu,
           "mem_mb": min(MEM_CAP, max(MEM_FLOOR, math.ceil(MARGIN * mem))),
           "runtime": min(RUNTIME_CAP, max(RUNTIME_FLOOR, math.ceil(MARGIN * secs / 60)))}
    out.update({k: int(v) for k, v in override.items() if k in KEYS})
    return out


def requested_hours(rows: dict[str, list[dict]], threads: dict[str, int]) -> tuple:
    """(GPU-hours, CPU-hours) the requests ``rows`` (``{rule: [request, ...]}``) ask for in all:
    GPUs x runtime, and threads (``threads[rule]``, else 1) x runtime."""
    gpu_h = sum(j["gpu"] * j["runtime"] for jobs in rows.values() for j in jobs) / 60
    cpu_h = sum(threads.get(rule, 1) * j["runtime"] for rule, jobs in rows.items()
                for j in jobs) / 60
    return gpu_h, cpu_h


def table(rows: dict[str, list[dict]], threads: dict[str, int], overridden=()) -> str:
    """The per-rule summary ``check --cluster`` prints: jobs, and the min-max of each request
    over them (``*``: set by the config's ``resources:``; ``capped``: an estimate reached a
    cap); then the GPU-hours and CPU-hours (threads x runtime) requested in all."""
    def span(values):
        lo, hi = min(values), max(values)
        return str(lo) if lo == hi else f"{lo}-{hi}"

    def note(rule, jobs):
        capped = any(j["runtime"] >= RUNTIME_CAP or j["mem_mb"] >= MEM_CAP for j in jobs)
        return ("  * resources:" if rule in overridden else "") + ("  capped" if capped else "")

    lines = [f"{'rule':28s} {'jobs':>5s}  {'gpu':>5s}  {'mem_mb':>13s}  {'runtime (min)':>13s}"]
    for rule, jobs in rows.items():
        lines.append(f"{rule:28s} {len(jobs):5d}  {span([j['gpu'] for j in jobs]):>5s}  "
                     f"{span([j['mem_mb'] for j in jobs]):>13s}  "
                     f"{span([j['runtime'] for j in jobs]):>13s}{note(rule, jobs)}")
    gpu_h, cpu_h = requested_hours(rows, threads)
    lines.append(f"requested in all: {gpu_h:.1f} GPU-hours, {cpu_h:.1f} CPU-hours "
                 f"(runtime limits, {MARGIN:g}x the estimates; at most, with every "
                 "replication round)")
    return "\n".join(lines)
