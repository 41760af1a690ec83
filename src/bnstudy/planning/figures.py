"""The figure jobs of a study's plan: which figure families it draws, for which experiments.

A mixin of :class:`bnstudy.planning.plan.Plan` (it needs the plan's ``config``, ``experiments``,
:meth:`res`, :attr:`tables`, :attr:`analyses`, :attr:`table_measure`, :meth:`dataset_kind` and
:meth:`experiment_measures`). A family is drawn where the study makes its tables and it has a
figure to draw (:mod:`bnstudy.plots`: its data kinds, and its ``in_experiment`` /
``in_study`` tests, so that no figure is scheduled over an empty table).
"""

from __future__ import annotations

import json
import re
from functools import cached_property
from pathlib import Path

from bnstudy import plots

RST_SPECIAL = re.compile(r"([\\`*_|\[\]<>:])")


class Figures:
    @cached_property
    def figures(self) -> dict:
        """The figure families this study draws: those whose tables it makes and that have at
        least one figure to draw (of ``plots.families`` where the config lists them)."""
        have = set(self.tables) | set(self.analyses) | {"claims"}  # every study's ledger
        chosen = self.config.get("plots", {}).get("families")
        return {n: f for n, f in plots.FAMILIES.items()
                if (chosen is None or n in chosen) and set(f.tables) <= have
                and self._outputs(f)}

    def plot_options(self) -> str:
        """The ``plots`` settings a figure job draws with, as the JSON its rule passes (and
        reruns on): every setting but ``families``, so that choosing which families to draw
        redraws no other family's figures."""
        options = {k: v for k, v in self.config.get("plots", {}).items() if k != "families"}
        return json.dumps(options, sort_keys=True)

    def _applies(self, family, experiment: str) -> bool:
        measured = {self.table_measure.get(t) for t in family.tables} - {None}
        if not measured <= set(self.experiment_measures(experiment)):
            return False
        kind = self.dataset_kind(experiment)
        if family.in_experiment is not None and not family.in_experiment(self.config,
                                                                          experiment):
            return False  # the options leave the rows this figure draws empty
        return (family.datasets is None or kind in family.datasets) and (
            kind not in family.skip_datasets)

    def figure_outputs(self, name: str) -> dict[str, str]:
        """``{experiment or "study": png}`` of one family."""
        return self._outputs(self.figures[name])

    def _outputs(self, f) -> dict[str, str]:
        name = f.name
        if f.scope == "study":
            ok = f.in_study is None or f.in_study(self.config)
            return {"study": self.res("figures", "study", f"{name}.png")} if ok else {}
        return {e: self.res("figures", e, f"{name}.png") for e in self.experiments
                if self._applies(f, e)}

    def figure_files(self, name: str) -> list[str]:
        """Every file one family's job writes: each figure's PNG and its ``plots.formats``
        copies (:func:`bnstudy.plots.export_paths`)."""
        options = self.config.get("plots", {})
        return [f for png in self.figure_outputs(name).values()
                for f in plots.export_paths(png, options)]

    def figure_report_entries(self, name: str) -> list[tuple[str, dict]]:
        """``[(file, labels)]`` of one family's files for Snakemake's report: each labelled by
        family, experiment (``study`` for a study figure) and format, so that no two files of
        a family share labels (the report reaches a file by its labels)."""
        options = self.config.get("plots", {})
        return [(f, {"family": name, "experiment": scope,
                     "format": Path(f).suffix.lstrip(".")})
                for scope, png in self.figure_outputs(name).items()
                for f in plots.export_paths(png, options)]

    def figure_caption(self, name: str) -> str:
        """The family's own caption as reStructuredText text (its markup characters escaped),
        for the description Snakemake's report shows (workflow/report/figure.rst)."""
        f = self.figures[name]
        where = ("one figure for the whole study" if f.scope == "study"
                 else "one figure per experiment (its label)")
        text = f"{f.caption} ({where}; the seeds per arm are under each figure)"
        return RST_SPECIAL.sub(r"\\\1", " ".join(text.split()))

    def figure_tables(self, name: str) -> list[str]:
        return [self.res("tables", f"{t}.parquet") for t in self.figures[name].tables]

    def all_figures(self) -> list[str]:
        return [p for n in self.figures for p in self.figure_outputs(n).values()]
