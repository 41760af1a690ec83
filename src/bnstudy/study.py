"""The study config: strict loading and every check, before any job runs.

:func:`read_yaml` reads a config file with a loader that rejects duplicate keys and names the
file, line and column of a YAML error; :func:`check` validates a loaded config (the JSON schema
``workflow/schemas/config.schema.yaml`` with its defaults filled in, then what a schema cannot
say: each dataset kind's declared options, training and model options, cross references, the
measures' and analyses' own option checks, batch sizes against the training set, ICS layer
indices against each model's layers, the device and the results directory). Every failure is a
:class:`ConfigError` of one short paragraph: the key path, the bad value and what is allowed.

The Snakefile calls :func:`check_files` and :func:`check` (through :func:`or_exit`, which prints
the message and exits 1 without a traceback); ``python -m bnstudy check FILE...`` does the same
from the command line.
"""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

SCHEMA = Path(__file__).resolve().parents[2] / "workflow" / "schemas" / "config.schema.yaml"
RESERVED_EXPERIMENTS = ("study",)  # figures/study/ holds the study-wide figures


class ConfigError(ValueError):
    """A bad study config, as one short paragraph."""


def _fail(path: str, msg: str):
    raise ConfigError(f"{path}: {msg}" if path else msg)


# -- strict YAML ------------------------------------------------------------------------------

class _StrictLoader(yaml.SafeLoader):
    """A safe loader that rejects a key given twice in one mapping (merge keys ``<<`` may still
    be overridden, as YAML intends)."""

    def construct_mapping(self, node, deep=False):
        seen: dict = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            mark = key_node.start_mark
            if key in seen:
                raise ConfigError(f"{mark.name}, line {mark.line + 1}, column {mark.column + 1}: "
                                  f"duplicate key {key!r} (first given on line {seen[key]}); "
                                  "YAML keeps only the last, so give each key once")
            seen[key] = mark.line + 1
        return super().construct_mapping(node, deep)


def read_yaml(path: str | Path) -> dict:
    """A config file's content; a ConfigError names a missing file, a YAML syntax error's line
    and column, or a duplicate key."""
    path = Path(path)
    if not path.is_file():
        _fail("", f"config file {str(path)!r} does not exist" + (
            " (it is a directory)" if path.is_dir() else ""))
    try:
        with open(path, encoding="utf-8") as fh:
            cfg = yaml.load(fh, Loader=_StrictLoader)  # noqa: S506 (a SafeLoader subclass)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        where = f", line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        _fail("", f"{path}{where}: YAML syntax error: {e.problem or e.context}")
    except yaml.YAMLError as e:
        _fail("", f"{path}: not valid YAML ({e})")
    if not isinstance(cfg, dict):
        _fail("", f"{path}: a config file must be a mapping of settings, got "
                  f"{type(cfg).__name__}")
    return cfg


def check_files(paths) -> list[dict]:
    """Each config file read strictly (Snakemake's own loader keeps the last of duplicate keys)."""
    return [read_yaml(p) for p in paths]


# -- the JSON schema ----------------------------------------------------------------------------

def _key_path(parts) -> str:
    return ".".join(str(p) for p in parts) or "(top level)"


def _allowed(error) -> str:
    """What the failed schema keyword allows, in words."""
    kw, val, sch = error.validator, error.validator_value, error.schema
    if kw == "additionalProperties":
        return f"the keys {sorted(sch.get('properties', {}))}" if "properties" in sch \
            else "no further keys"
    if kw == "required":
        return f"the keys {val} are required"
    if kw == "enum":
        return "one of " + ", ".join(map(repr, val))
    if kw == "const":
        return repr(val)
    if kw == "type":
        return f"a value of type {val}"
    if kw in ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"):
        op = {"minimum": ">=", "exclusiveMinimum": ">", "maximum": "<=",
              "exclusiveMaximum": "<"}[kw]
        return f"a number {op} {val}"
    if kw in ("anyOf", "oneOf"):
        return " or ".join(_describe(s) for s in val)
    if kw == "pattern":
        return f"text matching {val}"
    if kw == "propertyNames":
        return f"names matching {sch['propertyNames'].get('pattern', sch['propertyNames'])}"
    if kw in ("minItems", "maxItems", "minProperties", "uniqueItems", "multipleOf", "not"):
        return f"{kw} {val}"
    return f"{kw}: {val}"


def _describe(s: dict) -> str:
    if "const" in s:
        return repr(s["const"])
    if "enum" in s:
        return "one of " + ", ".join(map(repr, s["enum"]))
    bits = [s.get("type", "value")]
    for kw, op in (("minimum", ">="), ("exclusiveMinimum", ">")):
        if kw in s:
            bits.append(f"{op} {s[kw]}")
    return " ".join(map(str, bits))


def _bad_value(error) -> str:
    if error.validator == "additionalProperties":
        known = set(error.schema.get("properties", {}))
        extra = sorted(k for k in error.instance if k not in known)
        return f"unknown key(s) {extra}"
    if error.validator == "required":
        return error.message
    text = repr(error.instance)
    return "got " + (text if len(text) <= 80 else text[:77] + "...")


def validate_schema(cfg: dict, schema: str | Path = SCHEMA) -> dict:
    """``cfg`` validated against the JSON schema, defaults filled in (in place, as Snakemake's
    ``validate`` does); a ConfigError names the key path, bad value and what is allowed."""
    from jsonschema import Draft202012Validator, validators
    from jsonschema.exceptions import best_match

    schema_doc = yaml.safe_load(Path(schema).read_text())
    props = Draft202012Validator.VALIDATORS["properties"]

    def set_defaults(validator, properties, instance, sch):
        if isinstance(instance, dict):
            for name, sub in properties.items():
                if "default" in sub:
                    instance.setdefault(name, sub["default"])
        yield from props(validator, properties, instance, sch)

    cls = validators.extend(Draft202012Validator, {"properties": set_defaults})
    error = best_match(cls(schema_doc).iter_errors(cfg))
    if error is not None:
        if error.validator in ("anyOf", "oneOf") and error.context:
            deepest = max(error.context, key=lambda e: len(e.absolute_path))
            if len(deepest.absolute_path) > len(error.absolute_path):
                error = deepest
        _fail(_key_path(error.absolute_path), f"{_bad_value(error)}; allowed: {_allowed(error)}")
    return cfg


# -- what the schema cannot say --------------------------------------------------------------

def _results(cfg: dict) -> None:
    r = Path(cfg["results"])
    for p in (r, *r.parents):
        if p.exists() and not p.is_dir():
            _fail("results", f"{str(r)!r}: {str(p)!r} is an existing file, not a directory; "
                             "allowed: a directory path (new or existing)")


def _device(cfg: dict, local: bool) -> None:
    if not local:  # a cluster's compute nodes may have the GPUs the submit host lacks
        return
    from . import training

    try:
        training.resolve_device(cfg["device"])
    except ValueError as e:
        _fail("device", f"{e} (checked because jobs run on this machine)")


def _datasets(cfg: dict) -> dict[str, int]:
    from . import data

    sizes = {}
    for name, ds in cfg["datasets"].items():
        try:
            sizes[name] = data.n_train(ds["kind"], ds.get("options"))
        except data.BadOption as e:
            what = "got" if e.key in data.OPTIONS[ds["kind"]] else "unknown option, value"
            _fail(f"datasets.{name}.options.{e.key}", f"{what} {e.value!r}; allowed: {e.allowed}")
        except ValueError as e:
            _fail(f"datasets.{name}", str(e))
    return sizes


def _typed(section: str, items: dict, parse) -> dict:
    out = {}
    for name, d in items.items():
        try:
            out[name] = parse(d)
        except ValueError as e:
            _fail(f"{section}.{name}", str(e))
    return out


def _measure_options(cfg: dict) -> dict:
    """Each configured measure's options through its own module's parser."""
    from . import bn_jitter, ics, partition_density, smoothness, teacher_student

    parsers = {"partition_density": partition_density.Options.from_dict,
               "ics": ics.parse_options, "smoothness": smoothness.Options.from_dict,
               "bn_jitter": bn_jitter.Options.from_dict,
               "teacher_student": teacher_student.check_options}
    out = {}
    for name, parse in parsers.items():
        if name in cfg:
            try:
                out[name] = parse(cfg[name])
            except ValueError as e:
                _fail(name, str(e))
    return out


def _build(model_cfg, norm: str, kind: str, options: dict, forward: bool):
    """The model on the dataset's input shape (CPU, global RNG state kept); with ``forward``, a
    pass over two zero inputs (too many poolings for the image size fail here, not in a job)."""
    import torch

    from . import data, models

    input_shape, out_dim = data.shape(kind, options)
    with torch.random.fork_rng(devices=[]):
        net = models.build_model(model_cfg, norm, input_shape, out_dim)
    if forward:
        try:
            with torch.no_grad():
                net.eval()(torch.zeros(2, *input_shape))
        except RuntimeError as e:
            raise ValueError(f"fails on inputs of shape {tuple(input_shape)}: "
                             f"{str(e).splitlines()[0]}") from None
    return net


def _experiments(cfg: dict, sizes: dict, model_cfgs: dict, train_cfgs: dict, mopts: dict):
    from . import ics, measures, normalizers

    configured = sorted(m for m in measures.REGISTRY if m in cfg)
    built: dict = {}  # (model, dataset, normalizer) -> the model, built once
    for name, e in cfg["experiments"].items():
        where = f"experiments.{name}"
        if name in RESERVED_EXPERIMENTS:
            _fail(where, "'study' is reserved (figures/study/ holds study-wide figures); "
                         "rename the experiment")
        for key, table in (("dataset", "datasets"), ("model", "models"), ("training", "trainings")):
            if e[key] not in cfg[table]:
                _fail(f"{where}.{key}", f"{e[key]!r} is not defined; allowed: {sorted(cfg[table])}")
        unknown = sorted(set(e.get("measures", [])) - set(configured))
        if unknown:
            _fail(f"{where}.measures", f"{unknown} are not configured (no config section); "
                                       f"allowed: {configured}")
        ds = cfg["datasets"][e["dataset"]]
        kind = ds["kind"]
        for m in e.get("measures", []):
            if not measures.REGISTRY[m].applies_to(kind):
                _fail(f"{where}.measures", f"measure {m!r} needs a dataset of kind "
                      f"{list(measures.REGISTRY[m].dataset_kinds)}, dataset {e['dataset']!r} "
                      f"is {kind!r}")
        tc = train_cfgs[e["training"]]
        if tc.batch_size is not None and tc.batch_size > sizes[e["dataset"]]:
            _fail(f"trainings.{e['training']}.batch_size",
                  f"{tc.batch_size} is larger than the training set of dataset "
                  f"{e['dataset']!r} ({sizes[e['dataset']]} examples, experiment {name!r}); "
                  "allowed: at most the training-set size, or 'full'")
        mc = model_cfgs[e["model"]]
        for norm in ["none", *e["norms"]]:  # "none": the plain net, also run forward once
            if norm not in normalizers.REGISTRY:
                _fail(f"{where}.norms", f"unknown normalizer {norm!r}; "
                                        f"allowed: {normalizers.names()}")
            key = (e["model"], e["dataset"], norm)
            try:
                if key not in built:
                    built[key] = _build(mc, norm, kind, ds.get("options"), norm == "none")
            except ValueError as err:
                _fail(where, f"model {e['model']!r} with normalizer {norm!r} on dataset "
                             f"{e['dataset']!r}: {err}")
        if "ics" in mopts and "ics" in e.get("measures", ["ics"]):
            n_layers = len(ics.layer_groups(built[(e["model"], e["dataset"], "none")]))
            try:
                ics.resolve_layers(mopts["ics"]["layers"], n_layers)
            except ValueError as err:
                _fail("ics.layers", f"{err} (model {e['model']!r}, experiment {name!r})")


def check(cfg: dict, *, local: bool = True, schema: str | Path = SCHEMA) -> dict:
    """``cfg`` checked completely and with the schema's defaults filled in (in place).

    ``local``: jobs run on this machine, so a CUDA device must exist here (a cluster run checks
    it at the start of each train job instead).
    """
    from . import analyses, models, training

    if not isinstance(cfg, dict):
        _fail("", f"the config must be a mapping of settings, got {type(cfg).__name__}")
    validate_schema(cfg, schema)
    _results(cfg)
    _device(cfg, local)
    sizes = _datasets(cfg)
    model_cfgs = _typed("models", cfg["models"], models.ModelConfig.from_dict)
    train_cfgs = _typed("trainings", cfg["trainings"], training.TrainConfig.from_dict)
    for name, opts in cfg.get("analyses", {}).items():
        if name not in analyses.REGISTRY:
            _fail(f"analyses.{name}", f"unknown analysis; allowed: {sorted(analyses.REGISTRY)}")
        try:
            analyses.REGISTRY[name].check_options(opts)
        except ValueError as e:
            _fail(f"analyses.{name}", str(e))
    mopts = _measure_options(cfg)
    _experiments(cfg, sizes, model_cfgs, train_cfgs, mopts)
    return cfg


def merged(configs: list[dict]) -> dict:
    """Config files merged as Snakemake merges ``--configfile`` files (nested keys updated)."""
    def update(a: dict, b: dict) -> dict:
        for k, v in b.items():
            a[k] = update(dict(a[k]), v) if isinstance(v, dict) and isinstance(a.get(k),
                                                                                 dict) else v
        return a

    out: dict = {}
    for c in configs:
        update(out, c)
    return out


def or_exit(func, *args, **kwargs):
    """``func(*args, **kwargs)``; on a ConfigError print it and exit 1 (no traceback)."""
    try:
        return func(*args, **kwargs)
    except ConfigError as e:
        print(f"bnstudy config error: {e}", file=sys.stderr)
        sys.exit(1)

