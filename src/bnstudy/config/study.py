"""The study config: every check, before any job runs.

:func:`check` validates a loaded config: the JSON schema with its defaults filled in
(:mod:`bnstudy.config.loader`, which also reads config files strictly: duplicate keys, YAML errors
with line and column), then what a schema cannot say: each dataset kind's declared options,
training and model options (each architecture's own:
:func:`bnstudy.config.model_checks.check_options`),
cross references, the measures' and analyses' own option checks, batch sizes and epoch
milestones against the training set, each model's size and normalizer layers counted on the meta
device (:mod:`bnstudy.config.model_checks`) before it is built and run once on its dataset's input
shape, each measure's own ``check`` against that model (ICS's layer indices), the device, the
results directory, the datasets' seeds and files and the plot palette
(:mod:`bnstudy.config.setup_checks`). Every failure is a :class:`ConfigError` of one short
paragraph: the key path, the bad value and what is allowed.

The Snakefile calls :func:`load` (the files read strictly, ``extends:`` chains resolved, sweeps
expanded into the flat form: :mod:`bnstudy.config.sweeps`) and :func:`check_cached` on the result
(:func:`check`, not repeated for a config checked before: :mod:`bnstudy.keyed_cache`; through
:func:`or_exit`, which prints the message and exits 1 without a traceback);
``python -m bnstudy check FILE...`` runs :func:`check` from the command line.
"""

from __future__ import annotations

from pathlib import Path

from bnstudy.config import measure_config
from bnstudy.config.entries import entry_schemas
from bnstudy.config.loader import (
    SCHEMA,
    fail,
    merged,
    read_study,
    validate_schema,
)

RESERVED_EXPERIMENTS = ("study",)  # figures/study/ holds the study-wide figures


def load(paths, overrides: dict | None = None) -> dict:
    """The flat config of study files: each read strictly with its ``extends:`` chain
    (:func:`read_study`), merged in order as Snakemake merges ``--configfile`` files, then
    ``overrides`` (Snakemake's ``--config``) merged in and bounded
    (:func:`bnstudy.config.bounds.check_tree`), then the sweeps expanded
    (:func:`bnstudy.config.sweeps.expand`)."""
    from bnstudy.config import bounds, sweeps

    record: dict = {}
    raw = merged([*(read_study(p) for p in paths), dict(overrides or {})])
    bounds.check_tree(raw, variants=True)  # its size, keys and numbers, before anything is built
    flat = sweeps.expand(raw, record)
    axes = sweeps.experiment_axes(flat, record)
    if axes:
        flat["sweep_axes"] = axes
    return flat


# -- what the schema cannot say --------------------------------------------------------------

def _device(cfg: dict, local: bool) -> None:
    if not local:  # a cluster's compute nodes may have the GPUs the submit host lacks
        return
    from bnstudy.train import loop as training

    try:
        training.resolve_device(cfg["device"])
    except ValueError as e:
        fail("device", f"{e} (checked because jobs run on this machine)")


def _datasets(cfg: dict) -> dict[str, int]:
    from bnstudy import data

    sizes = {}
    for name, ds in cfg["datasets"].items():
        try:
            sizes[name] = data.n_train(ds["kind"], ds.get("options"))
        except data.BadOption as e:
            what = "got" if e.key in data.OPTIONS[ds["kind"]] else "unknown option, value"
            fail(f"datasets.{name}.options.{e.key}", f"{what} {e.value!r}; allowed: {e.allowed}")
        except ValueError as e:
            fail(f"datasets.{name}", str(e))
    return sizes


def _typed(section: str, items: dict, parse, check=None) -> dict:
    out = {}
    for name, d in items.items():
        try:
            if check is not None:
                check(d)
            out[name] = parse(d)
        except ValueError as e:
            fail(f"{section}.{name}", str(e))
    return out


def _build(model_cfg, norm: str, kind: str, options: dict, forward: bool):
    """The model on the dataset's input shape (CPU, global RNG state kept); with ``forward``,
    initialized and run over two zero inputs (too many poolings for the image size fail here, not
    in a job), otherwise only constructed, its random draws zeroes (:func:`bnstudy.networks.meta.
    no_draws`): a normalizer's bad options fail at construction, and a paper-scale study's
    dozens of normalizer arms draw no random weights only to be discarded."""
    import contextlib

    import torch

    from bnstudy import data
    from bnstudy.networks import meta, models

    input_shape, out_dim = data.shape(kind, options)
    with torch.random.fork_rng(devices=[]), (
            contextlib.nullcontext() if forward else meta.no_draws()):
        net = models.build_model(model_cfg, norm, input_shape, out_dim)
    if forward:
        # a user's model (from) is the user's code: any error it raises is named in one line
        errors = Exception if getattr(model_cfg, "from_", None) else RuntimeError
        who = f"{model_cfg.from_!r} " if getattr(model_cfg, "from_", None) else ""
        try:
            with torch.no_grad():
                out = net.eval()(torch.zeros(2, *input_shape))
        except errors as e:
            raise ValueError(f"{who}fails on inputs of shape {tuple(input_shape)}: "
                             f"{(str(e).splitlines() or [type(e).__name__])[0]}") from None
        if not isinstance(out, torch.Tensor) or tuple(out.shape) != (2, out_dim):
            got = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
            raise ValueError(f"{who}gives outputs {got} on 2 inputs of shape {tuple(input_shape)}; "
                             f"allowed: (2, {out_dim}), the dataset's {out_dim} outputs")
    return net


def _experiments(cfg: dict, sizes: dict, model_cfgs: dict, train_cfgs: dict, mopts: dict):
    from bnstudy import data, measures
    from bnstudy.config import model_checks, setup_checks
    from bnstudy.networks import normalizers

    configured = sorted(m for m in measures.REGISTRY if m in cfg)
    built: dict = {}  # (model, dataset, normalizer) -> the model, built once
    planned: set = set()  # (model, dataset, normalizers) counted on the meta device
    for name, e in cfg["experiments"].items():
        where = f"experiments.{name}"
        if name in RESERVED_EXPERIMENTS:
            fail(where, "'study' is reserved (figures/study/ holds study-wide figures); "
                         "rename the experiment")
        for key, table in (("dataset", "datasets"), ("model", "models"), ("training", "trainings")):
            if e[key] not in cfg[table]:
                fail(f"{where}.{key}", f"{e[key]!r} is not defined; allowed: {sorted(cfg[table])}")
        unknown = sorted(set(e.get("measures", [])) - set(configured))
        if unknown:
            fail(f"{where}.measures", f"{unknown} are not configured (no config section); "
                                       f"allowed: {configured}")
        ds = cfg["datasets"][e["dataset"]]
        kind = ds["kind"]
        for m in e.get("measures", []):
            if not measures.REGISTRY[m].applies_to(kind):
                fail(f"{where}.measures", f"measure {m!r} needs a dataset of kind "
                      f"{list(measures.REGISTRY[m].dataset_kinds)}, dataset {e['dataset']!r} "
                      f"is {kind!r}")
        tc = train_cfgs[e["training"]]
        if tc.batch_size is not None and tc.batch_size > sizes[e["dataset"]]:
            fail(f"trainings.{e['training']}.batch_size",
                  f"{tc.batch_size} is larger than the training set of dataset "
                  f"{e['dataset']!r} ({sizes[e['dataset']]} examples, experiment {name!r}); "
                  "allowed: at most the training-set size, or 'full'")
        mc = model_cfgs[e["model"]]
        shape, out_dim = data.shape(kind, ds.get("options"))
        setup_checks.check_training_on_data(where, tc, sizes[e["dataset"]], shape)
        arms = (e["model"], e["dataset"], tuple(e["norms"]))
        try:  # counted on the meta device before anything is allocated, once per model and data
            if arms not in planned:
                model_checks.check_plan(mc, e["norms"], shape, out_dim,
                                        cfg["limits"]["parameters"])
                planned.add(arms)
        except ValueError as err:
            fail(where, f"model {e['model']!r} on dataset {e['dataset']!r}: {err}")
        for norm in ["none", *e["norms"]]:  # "none": the plain net, also run forward once
            if norm not in normalizers.REGISTRY:
                fail(f"{where}.norms", f"unknown normalizer {norm!r}; "
                                        f"allowed: {normalizers.names()}")
            key = (e["model"], e["dataset"], norm)
            try:
                if key not in built:  # the plain net is kept (the measures' checks read it)
                    net = _build(mc, norm, kind, ds.get("options"), norm == "none")
                    built[key] = net if norm == "none" else None
            except ValueError as err:
                fail(where, f"model {e['model']!r} with normalizer {norm!r} on dataset "
                             f"{e['dataset']!r}: {err}")
        plain = built[(e["model"], e["dataset"], "none")]
        measure_config.check_experiment(name, e, kind, mopts, plain)


def check(cfg: dict, *, local: bool = True, schema: str | Path = SCHEMA) -> dict:
    """``cfg`` checked completely and with the schema's defaults filled in (in place).

    ``local``: jobs run on this machine, so a CUDA device must exist here (a cluster run checks
    it at the start of each train job instead).
    """
    from bnstudy import analyses, data
    from bnstudy.config import bounds, model_checks, resource_checks, setup_checks
    from bnstudy.networks import models
    from bnstudy.train import loop as training

    if not isinstance(cfg, dict):
        fail("", f"the config must be a mapping of settings, got {type(cfg).__name__}")
    bounds.check_tree(cfg)  # its size, text keys, finite numbers; then the names' lengths
    bounds.check_names(cfg)
    # the measures' sections, the dataset kinds and the models' and trainings' keys are
    # declared by their own classes and registries, and generated into the schema here
    measure_config.every_measure(cfg)
    validate_schema(cfg, schema, measure_config.sections(), data.kinds(), entry_schemas())
    setup_checks.check_results(cfg)
    _device(cfg, local)
    sizes = _datasets(cfg)
    bounds.check_datasets(cfg)  # numbers each generated dataset holds, before any is made
    setup_checks.check_datasets(cfg, local)
    setup_checks.check_plots(cfg)
    _user_normalizers(cfg)  # before the models: their norm_options may name them
    model_cfgs = _typed("models", cfg["models"], models.ModelConfig.from_dict,
                        model_checks.check_options)
    train_cfgs = _typed("trainings", cfg["trainings"], training.TrainConfig.from_dict)
    for name, opts in cfg.get("analyses", {}).items():  # each entry parsed by its Options
        if name not in analyses.REGISTRY:
            fail(f"analyses.{name}", f"unknown analysis; allowed: {sorted(analyses.REGISTRY)}")
        try:
            analyses.REGISTRY[name].options.parse(opts)
        except ValueError as e:
            fail(f"analyses.{name}", str(e))
    mopts = measure_config.options(cfg)
    bounds.check_memory_budgets(cfg)
    resource_checks.check(cfg)  # the resources: section names rules and valid requests
    _replication(cfg)
    _experiments(cfg, sizes, model_cfgs, train_cfgs, mopts)
    return cfg


def check_cached(cfg: dict, *, local: bool = True, schema: str | Path = SCHEMA) -> dict:
    """:func:`check`, remembered (:mod:`bnstudy.keyed_cache`): a config that this package, schema,
    torch and Python checked before, with the same ``local`` and home folder, is not checked
    again -- no model built, torch not imported -- but filled in from the stored result; what
    the check reads of this machine is checked again on every call: the results directory and
    the datasets' files (:mod:`bnstudy.config.setup_checks`) and, for a ``cuda`` device with
    local jobs, the device. Only a config that passes is stored. The Snakefile calls this (each
    Snakemake start, cluster jobs' included); ``python -m bnstudy check`` calls :func:`check`."""
    import os

    from bnstudy import keyed_cache
    from bnstudy.config import setup_checks

    path = Path(schema)
    from bnstudy.user_code import config_digests

    payload = {"config": cfg, "local": local, "home": os.path.expanduser("~"),
               "user_code": config_digests(cfg),  # a user's file edited: checked again
               "schema": path.read_text() if path.is_file() else str(path)}
    filled = keyed_cache.remember("config-check", payload,
                                  lambda: check(cfg, local=local, schema=schema),
                                  lambda v: isinstance(v, dict) and isinstance(cfg, dict))
    if filled is not cfg:  # read back: what the check reads of this machine, read again
        cfg.clear()
        cfg.update(filled)
        setup_checks.check_results(cfg)
        setup_checks.check_datasets(cfg, local)
        if str(cfg.get("device", "")).startswith("cuda"):
            _device(cfg, local)
    return cfg


def _user_normalizers(cfg: dict) -> None:
    """Load and register the config's own normalizers (:mod:`bnstudy.networks.external`): each
    through the registry's conventions, each ``claims_as`` a registered normalizer."""
    from bnstudy.networks import external, normalizers

    for name, entry in (cfg.get("normalizers") or {}).items():
        try:
            external.register_normalizer(name, entry["from"])
        except ValueError as e:
            fail(f"normalizers.{name}", str(e))
        alias = entry.get("claims_as")
        builtins = sorted(set(normalizers.names()) - set(cfg["normalizers"]))
        if alias is not None and alias not in builtins:
            fail(f"normalizers.{name}.claims_as", f"{alias!r} is not a built-in normalizer; "
                 f"allowed: {', '.join(builtins)}")


def _replication(cfg: dict) -> None:
    """Each replication policy parses, an experiment declares no more seeds than its first
    round holds (the rounds add the next integers above them), and its seeds and rounds stay
    within ``limits.seeds`` (:func:`bnstudy.config.bounds.check_seeds`)."""
    from bnstudy.config import bounds
    from bnstudy.replication import policy as replication

    try:
        found = replication.policies(cfg)
    except ValueError as err:
        where, _, why = str(err).partition(": ")
        fail(where, why)
    cap = bounds.limit(cfg, "seeds")
    for name, e in cfg["experiments"].items():
        bounds.check_seeds(f"experiments.{name}.seeds", len(e["seeds"]), "lists", cap)
    for name, policy in found.items():
        e = cfg["experiments"][name]
        own = isinstance(e.get("replication"), dict)
        bounds.check_seeds(f"experiments.{name}.replication" if own else "replication",
                           policy.rounds[-1], f"the last round of experiment {name!r} (rounds "
                           f"{_short_list(policy.rounds)}) runs", cap)
        if len(e["seeds"]) > policy.rounds[0]:
            fail(f"experiments.{name}.seeds",
                 f"{len(e['seeds'])} seeds {e['seeds']} are more than the first replication "
                 f"round holds ({policy.rounds[0]}, rounds {list(policy.rounds)}); allowed: at "
                 f"most {policy.rounds[0]} (the rounds add the next seeds above them)")


def _short_list(values) -> str:
    """A list in words, its middle left out past six items."""
    v = list(values)
    return str(v) if len(v) <= 6 else f"[{v[0]}, {v[1]}, ..., {v[-2]}, {v[-1]}]"
