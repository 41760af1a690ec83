"""A study's estimated compute, and the generated cost block of a config file's header.

The paper configs used to state their cost in hand-written paragraphs that nothing checked, and
that drifted from the cluster requests (:mod:`bnstudy.planning.job_resources`) as the studies grew.
This
module states the cost from the same per-job work estimates
(:class:`bnstudy.planning.resources.Work`:
sample passes through each model, whose FLOPs are twice the multiply-accumulates
:mod:`bnstudy.model_size` counts, the count ``torch.utils.flop_counter`` gives), but *without*
the requests' margin, floors and caps: what the study is expected to cost, not what a scheduler
is asked for. A job runs where its request puts it (a GPU when ``check --cluster`` gives it
one), at the throughputs :mod:`bnstudy.planning.resources` states; every job of every planned
replication round is counted, so the figures are the most the study can cost.

:func:`stages` splits the cost into training (population normalization's refreshes included,
and shown apart), each measure, and the rest (data, tables, analyses, figures, report);
:func:`block` writes it as the header block between :data:`BEGIN` and :data:`END`, with the
requested totals beside it for comparison; :func:`rewrite` puts that block into a config file
(``python -m bnstudy check --cluster --cost-header FILE``) and changes no other byte of it.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from pathlib import Path

from bnstudy import measures
from bnstudy.config.loader import fail
from bnstudy.planning import resources

COMMAND = "python -m bnstudy check --cluster --cost-header"
BEGIN = f"# -- cost (generated: {COMMAND} FILE; do not edit) --"
END = "# -- end cost --"
REFRESH_ROW = "  of which PN refreshes"
REST = "rest (data, tables, figures)"
WIDTH = 95  # characters a line of the block


@dataclass(frozen=True)
class Stage:
    """One stage's estimate: its jobs, the FLOPs of their sample passes (float32 and float64
    together), the GPU-hours of the jobs that run on GPUs (GPUs x estimated time) and the
    CPU-hours of all its jobs (threads x estimated time, as ``check --cluster`` counts its
    requests: a GPU job holds its CPU threads too)."""

    name: str
    jobs: int
    flops: float
    gpu_hours: float
    cpu_hours: float

    def __add__(self, other: Stage) -> Stage:
        return Stage(self.name, self.jobs + other.jobs, self.flops + other.flops,
                     self.gpu_hours + other.gpu_hours, self.cpu_hours + other.cpu_hours)


def _flops(work: resources.Work) -> float:
    return work.passes * work.flops + work.fp64


def _hours(work: resources.Work, gpus: int, threads: int, start: bool = True) -> tuple:
    """(GPU-hours, CPU-hours) of ``work`` on ``gpus`` GPUs (0: on ``threads`` CPU threads);
    ``start=False`` leaves out the job's start (for a part of a job)."""
    secs = resources.seconds(work, gpus > 0, threads)
    if not start:
        secs -= resources.seconds(resources.Work(), gpus > 0, threads)
    return gpus * secs / 3600, threads * secs / 3600


def _stage_of(rule: str) -> str:
    return rule if rule == "train" or rule in measures.REGISTRY else REST


def stages(plan) -> list[Stage]:
    """The study's estimate per stage (``train``, then each measure it runs, then
    :data:`REST`), with the :data:`REFRESH_ROW` part of ``train`` after it when the study has
    population normalization: the refreshes alone, in their jobs' hours and without a job of
    their own (``jobs`` is the number of train jobs that refresh)."""
    out: dict[str, Stage] = {}
    refresh = Stage(REFRESH_ROW, 0, 0.0, 0.0, 0.0)
    for rule, jobs in plan.resource_jobs().items():
        name = _stage_of(rule)
        threads = plan.config["threads"] if name != REST else 1
        for wildcards in jobs:
            work = plan.job_work(rule, wildcards)
            gpus = plan.job_resources(rule, wildcards)["gpu"]
            part = Stage(name, 1, _flops(work), *_hours(work, gpus, threads))
            out[name] = out[name] + part if name in out else part
            if rule == "train":
                # the same run's work without a refresh: norm "none" has no before_update hook,
                # and a run's model size does not depend on its normalizer (model_size.size)
                bare = plan.job_work(rule, {**wildcards, "norm": "none"})
                if bare != work:
                    extra = resources.Work(work.passes - bare.passes, work.flops, work.nbytes,
                                           work.calls - bare.calls)
                    refresh = refresh + Stage(REFRESH_ROW, 1, _flops(extra),
                                              *_hours(extra, gpus, threads, start=False))
    order = ["train", *plan.measures, REST]
    rows = [out[n] for n in order if n in out]
    if refresh.jobs:
        rows.insert(1, refresh)
    return rows


def block(plan) -> str:
    """The generated cost block (marker lines included, each line ending in a newline)."""
    r = resources
    rows = stages(plan)
    total = Stage("total", 0, 0.0, 0.0, 0.0)
    for s in rows:
        if s.name != REFRESH_ROW:
            total = total + s
    req_gpu, req_cpu = plan.requested_hours()
    prose = (
        "Estimated compute of every job of every planned replication round (the most the "
        "study runs): the work estimates of `check --cluster` without their margin, floors and "
        "caps (bnstudy.planning.cost). A sample pass costs 2 FLOPs per multiply-accumulate of the "
        "model (bnstudy.model_size, equal to torch.utils.flop_counter's count) and 4 per "
        f"activation; a forward+backward is {r.FORWARD_BACKWARD} passes, a population-norm (PN) "
        f"refresh {r.REFRESH} per population sample. Assumed throughput: a GPU "
        f"{r.GPU_FLOPS / 1e12:g} TFLOP/s float32 (TF32 off), {r.GPU_FP64 / 1e12:g} TFLOP/s "
        f"float64, {r.GPU_BYTES / 1e9:g} GB/s; a CPU thread {r.CPU_FLOPS / 1e9:g} GFLOP/s, "
        f"{r.CPU_FP64 / 1e9:g} GFLOP/s float64, {r.CPU_BYTES / 1e9:g} GB/s; "
        f"{r.CALL_SECONDS * 1e3:g} ms a step or pass and {r.START_SECONDS:g} s a job start "
        f"({r.START_SECONDS + r.GPU_START_SECONDS:g} s on a GPU). A job runs on a GPU when "
        "`check --cluster` gives it one; CPU-hours are threads x time of every job, GPU jobs "
        "included.")
    lines = [BEGIN, *("# " + line for line in textwrap.wrap(prose, WIDTH - 2)),
             f"#   {'stage':30s} {'jobs':>5s} {'PFLOP':>9s} {'GPU-hours':>10s} {'CPU-hours':>10s}"]
    for s in [*rows, total]:
        lines.append(f"#   {s.name:30s} {s.jobs:5d} {s.flops / 1e15:9.3f} {s.gpu_hours:10.2f} "
                     f"{s.cpu_hours:10.2f}")
    ask = (f"For comparison, `check --cluster` requests {req_gpu:.1f} GPU-hours and "
           f"{req_cpu:.1f} CPU-hours in all (runtime limits: {r.MARGIN:g}x the estimates, at "
           f"least {r.RUNTIME_FLOOR} minutes a job).")
    lines += [*("# " + line for line in textwrap.wrap(ask, WIDTH - 2)), END]
    return "".join(line.rstrip() + "\n" for line in lines)


def with_block(text: str, new: str, where: str = "the file") -> str:
    """``text`` with its cost block replaced by ``new`` (or, when it has none, ``new`` inserted
    after the header's first paragraph: its leading comment lines up to the first bare ``#``
    line, blank line or YAML line, with a ``#`` line before the block); every other character
    of ``text`` is kept. The lines written end as the file's first line does."""
    lines = text.splitlines(keepends=True)
    bare = [line.rstrip("\r\n") for line in lines]
    eol = "\r\n" if lines and lines[0].endswith("\r\n") else "\n"  # the file's line ends
    new = new.replace("\r\n", "\n").replace("\n", eol)
    begins = [i for i, line in enumerate(bare) if line == BEGIN]
    ends = [i for i, line in enumerate(bare) if line == END]
    if begins or ends:
        if len(begins) != 1 or len(ends) != 1 or ends[0] < begins[0]:
            fail(where, f"expected one cost block, a {BEGIN!r} line and then a {END!r} line; "
                 f"found {len(begins)} begin and {len(ends)} end lines")
        return "".join(lines[:begins[0]]) + new + "".join(lines[ends[0] + 1:])
    if not bare or not bare[0].startswith("#"):
        fail(where, "has no header comment to put the cost block in; allowed: a file whose "
             "first line is a comment")
    end = next((i for i, line in enumerate(bare) if not line.startswith("#") or
                line.strip() == "#"), len(lines))
    head = "".join(lines[:end])
    if head and not head.endswith("\n"):
        head += eol
    return head + "#" + eol + new + "".join(lines[end:])


def rewrite(path, plan) -> bool:
    """Rewrite the cost block of the config file ``path`` from ``plan`` (its study) in place;
    True when the file changed. Line endings and every byte outside the block are kept."""
    path = Path(path)
    with open(path, encoding="utf-8", newline="") as f:
        text = f.read()
    out = with_block(text, block(plan), str(path))
    if out != text:
        with open(path, "w", encoding="utf-8", newline="") as f:
            f.write(out)
    return out != text


def duration(seconds: float) -> str:
    """'about 40 s', 'about 12 min', 'about 3.5 h', 'about 2.1 days'."""
    if seconds < 90:
        return f"about {seconds:.0f} s"
    if seconds < 90 * 60:
        return f"about {seconds / 60:.0f} min"
    if seconds < 48 * 3600:
        return f"about {seconds / 3600:.2g} h"
    return f"about {seconds / 86400:.2g} days"


# A local job's start from the fork server (docs/running.md: 0.3-0.4 s a job), in place of a
# cluster job's START_SECONDS. The rest is the cost model's (conservative throughputs, every
# planned replication round): an upper estimate. On the 2-core development machine the default
# study is estimated at about 30 min and took 4 min 20 s alone (README, 2026-11-28); the tiny
# study about 48 s, and 2 min 21 s beside four other engineers' jobs (2026-12-06). `check`
# scales the CPU jobs by bnstudy.planning.budget.CALIBRATION (measured against the model)
LOCAL_START = 0.4


def on_this_machine(plan, cores: int, gpu: bool, calibration: float = 1.0) -> dict:
    """How long the study should take here, from the same work estimates as :func:`stages`:
    each job on a GPU when this machine has one and the job's request gets one, else on the
    config's threads; ``jobs``, ``serial`` (seconds, one job at a time) and ``wall`` (seconds
    with Snakemake's ``--cores cores``: the CPU jobs spread over ``cores // threads`` slots, the
    GPU jobs one at a time, never less than the longest job). ``calibration`` scales the CPU
    jobs' times (``bnstudy.planning.budget.CALIBRATION``: measured against the model's)."""
    threads = max(1, int(plan.config["threads"]))
    cpu_s = gpu_s = longest = 0.0
    jobs = 0
    for rule, found in plan.resource_jobs().items():
        t = threads if _stage_of(rule) != REST else 1
        for wildcards in found:
            work = plan.job_work(rule, wildcards)
            on_gpu = gpu and plan.job_resources(rule, wildcards)["gpu"] > 0
            secs = resources.seconds(work, on_gpu, t) - resources.START_SECONDS + LOCAL_START
            secs *= 1.0 if on_gpu else calibration
            jobs += 1
            longest = max(longest, secs)
            if on_gpu:
                gpu_s += secs
            else:
                cpu_s += secs * t / threads
    slots = max(1, cores // threads)
    return {"jobs": jobs, "serial": cpu_s + gpu_s,
            "wall": max(cpu_s / slots, gpu_s, longest)}
