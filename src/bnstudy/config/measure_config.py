"""A study's measure sections: each registered measure's section schema (from its options
class), the ``every_measure`` switch that gives every unconfigured measure its defaults, the
configured measures' typed options, and each measure's own check against an experiment's model
(:func:`bnstudy.config.study.check` calls them in that order)."""

from __future__ import annotations

from bnstudy.config.loader import fail


def every_measure(cfg: dict) -> None:
    """With ``every_measure: true``, a section of default options (``{}``, filled in by the
    schema) for each registered measure the config does not configure; refused unless a
    boolean."""
    from bnstudy import measures

    flag = cfg.get("every_measure", False)
    if not isinstance(flag, bool):
        fail("every_measure", f"got {flag!r}; allowed: true or false")
    if flag:
        for name in measures.REGISTRY:
            if cfg.get(name) is None:
                cfg[name] = {}


def options(cfg: dict) -> dict:
    """Each configured measure's typed options (:meth:`bnstudy.options.Options.parse`)."""
    from bnstudy import measures

    out = {}
    for name, measure in measures.REGISTRY.items():
        if name in cfg:
            try:
                out[name] = measure.options.parse(cfg[name])
            except ValueError as e:
                fail(name, str(e))
    return out


def check_experiment(name: str, e: dict, kind: str, mopts: dict, plain) -> None:
    """Each measure the experiment runs (configured, for its data kind, in its ``measures`` list
    when it has one) checks its options against the experiment's plain model (its ``check``,
    :mod:`bnstudy.measures`), and its ``map_seeds`` (if it has them) against the experiment's
    seeds; an error names the option, the model and the experiment."""
    from bnstudy import measures

    for m, opts in mopts.items():
        spec = measures.REGISTRY[m]
        if not spec.applies_to(kind) or m not in e.get("measures", [m]):
            continue
        drawn = getattr(opts, "map_seeds", "all")
        if drawn != "all" and not set(drawn) & set(e.get("seeds", [])):
            fail(f"{m}.map_seeds", f"{list(drawn)} names none of experiment {name!r}'s seeds "
                 f"{list(e.get('seeds', []))}: its maps and their figure would be empty")
        if spec.check is None:
            continue
        try:
            spec.check(opts, plain)
        except ValueError as err:  # the check names <section>.<key>; else its section does
            fail("" if str(err).startswith(f"{m}.") else m,
                 f"{err} (model {e['model']!r}, experiment {name!r})")


def sections() -> dict[str, dict]:
    """Each registered measure's config section schema, derived from its options class."""
    from bnstudy import measures

    return {m: spec.options.json_schema() for m, spec in measures.REGISTRY.items()}
