"""The Jinja2 template of the HTML report (kept as a Python constant so that the report rule's
code hash, which covers the modules report.py imports, covers the template too).

The context is built by :func:`bnstudy.report.build.build`: ``title``, ``answers``,
``answer_others``, ``forest`` and ``papers`` (:mod:`bnstudy.report.answer`), ``scale`` (what the
study ran: :mod:`bnstudy.report.scale`), ``prose``, ``found`` (the summary of the claims ledger,
:mod:`bnstudy.report.summary`), ``sections`` (only those with a figure or a summary table),
``ledger`` (every row), ``config_yaml`` and ``provenance``. Strings marked safe (tables that
pandas or :mod:`bnstudy.report.rounds` render, which escape their cells) are HTML already;
everything else, section findings included, is escaped by autoescaping.

It opens with the answer: a one-line reduced-scale caveat, one sentence per claim
(:mod:`bnstudy.report.answer`) and the forest plot of the paper tests when the study drew one
(the study figure ``forest``); then what the study ran, with the deviations grouped under the
paper whose protocol they compare against. Figures are never folded; the method texts, the
row-by-row findings, the full ledger, the config and the provenance are.

The page reads at 1280 px (one column; table cells wrap, no table is wider than the page) and
prints:
the print stylesheet opens every collapsed section (``::details-content``, Chromium 131+ and
current Firefox), keeps figures whole on a page and hides the navigation.
"""

from __future__ import annotations

CSS = """
*{box-sizing:border-box}
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",Arial,sans-serif;
 margin:0;color:#222;line-height:1.45;background:#fafafa}
main{max-width:1180px;margin:0 auto;padding:1em 1.5em 3em;background:#fff}
h1{border-bottom:2px solid #444;margin-top:.3em} h2{border-bottom:1px solid #aaa;margin-top:2.2em}
h3{margin-top:1.5em;color:#333}
a{color:#1a5fb4;text-decoration:none} a:hover{text-decoration:underline}
figure{margin:1em 0;padding:.5em;border:1px solid #e4e4e4;border-radius:4px}
figure img{display:block;max-width:100%;height:auto;margin:0 auto}
figcaption{font-size:.88em;color:#444;margin-top:.4em}
.scroll{max-width:100%;margin:.5em 0}
table{border-collapse:collapse;font-size:.84em;max-width:100%}
td,th{border:1px solid #ccc;padding:3px 7px;text-align:right;vertical-align:top;
 overflow-wrap:anywhere}
th{background:#f0f0f0;position:sticky;top:0} td.l,th.l{text-align:left}
pre{background:#f6f6f6;padding:.8em;overflow-x:auto;font-size:.8em}
nav.toc{background:#f4f6f8;border:1px solid #dde;border-radius:4px;padding:.6em 1.2em;
 margin:1.5em 0}
nav.toc ol{columns:2 22em;margin:.3em 0;padding-left:1.4em} nav.toc li{margin:.15em 0}
.up{font-size:.75em;font-weight:normal;margin-left:.6em}
.v{font-weight:bold} .nw{overflow-wrap:normal}
details summary{cursor:pointer} table.found td{font-size:.95em}
.v-supported{background:#d4edda} .v-contradicted-at-this-setting{background:#f8d7da}
.v-absent-at-this-setting{background:#d6e4f0}
.v-undecided{background:#fff3cd} .v-not-measured{background:#e2e3e5}
.unmeasured{font-size:.92em;color:#444}
.counts span{display:inline-block;padding:1px 8px;margin-right:.4em;border-radius:3px}
ul.answers li{margin:.45em 0;font-size:1.04em} p.caveat{background:#fff8e5;border-left:4px solid
 #e0a800;padding:.4em .8em} figure.forest{border-color:#bbb}
details.fold>summary{font-weight:bold;margin:.6em 0} ul.papers>li{margin:.5em 0}
.scale{font-size:1.05em} .dev{color:#7a3b00;font-size:.92em} ul.setting li{margin:.25em 0}
dl dt{font-weight:bold} dl dd{margin:0 0 .4em 1.5em} .apart{font-size:.92em;color:#333}
@media print{
 body{background:#fff} main{max-width:none;padding:0}
 nav.toc,.up{display:none}
 details::details-content{content-visibility:visible;display:contents}
 details>summary{list-style:none;font-weight:bold}
 figure{break-inside:avoid;border:none} figure img{max-height:24cm}
 th{position:static} .scroll{overflow:visible}
 h2,h3{break-after:avoid}
}
"""

TEMPLATE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{ title }}</title><style>{{ css }}</style></head>
<body><main>
<h1 id="top">{{ title }}</h1>
<section id="answer">
{% if scale.reduced %}<p class="caveat"><b>Reduced scale.</b> {{ scale.runs }} run{{ "" if
 scale.runs == 1 else "s" }} on small settings, not the papers': each finding holds at this
 study's setting; how each experiment differs from each paper's protocol is
 <a href="#summary">below</a>.</p>{% endif %}
{% if answers %}<h2>What this study found</h2>
<ul class="answers">{% for a in answers %}<li data-claim="{{ a.claim_id }}">{{ a.text }}</li>
{% endfor %}</ul>
{% if answer_others %}<p class="apart">{{ answer_others }}</p>{% endif %}{% endif %}
{% if forest %}<figure class="forest" id="fig-forest"><img alt="forest plot of the paper tests"
 src="data:image/png;base64,{{ forest.data }}"><figcaption>{{ forest.caption }}</figcaption>
</figure>{% endif %}
</section>
<section id="summary">
<h2>What this study ran{% if scale.reduced %}: reduced scale{% endif %}</h2>
<p class="scale">This study trained {{ scale.runs }} run{{ "" if scale.runs == 1
else "s" }} ({{ scale.diverged }} diverged) in {{ scale.experiments | length }}
experiment{{ "" if scale.experiments | length == 1 else "s" }} (a run: one normalizer, one
seed):</p>
<ul class="setting">{% for e in scale.experiments %}<li><b>{{ e.name }}</b>: {{ e.setting }};
 seeds per arm: {{ e.seeds }}{% if e.planned %} (planned: no runs in the tables){% endif %}</li>
{% endfor %}</ul>
{% if papers %}<h3 id="deviations">How it differs from each paper's protocol</h3>
<ul class="papers">{% for p in papers %}<li><b>{{ p.paper }}</b><ul>{% for pr in p.protocols
%}<li>{{ pr.protocol }}{% if pr.same %} <i>(run as the paper did: {{ pr.same | join(", ")
}})</i>{% endif %}{% if pr.lines %}<ul class="dev">{% for line, where in pr.lines %}<li>{{ line
}} <i>({{ where | join(", ") }})</i></li>{% endfor %}</ul>{% endif %}</li>
{% endfor %}</ul></li>
{% endfor %}</ul>{% endif %}
{% if scale.paper_scale %}<p>At paper scale (a GPU cluster), these configs would run the papers'
protocols:</p><ul>{% for line in scale.paper_scale %}<li>{{ line }}</li>{% endfor %}</ul>{%
 endif %}
<h3>The verdicts in numbers{% if scale.reduced %}, at this reduced scale{% endif %}</h3>
{% for p in prose %}<p class="prose">{{ p }}</p>
{% endfor %}
</section>
<nav class="toc" id="contents"><b>Contents</b><ol>
<li><a href="#answer">What this study found</a></li>
<li><a href="#summary">What this study ran</a></li>
{% if found.rows or found.unmeasured %}<li><a href="#findings">Findings</a></li>{% endif %}
{% for s in sections %}<li><a href="#{{ s.id }}">{{ s.title }}</a></li>
{% endfor %}{% if rounds %}<li><a href="#rounds">Replication rounds</a></li>{% endif %}
{% if variance %}<li><a href="#variance">More seeds or more probes?</a></li>{% endif %}
{% if ledger %}<li><a href="#claims">Full claims ledger</a></li>{% endif %}
<li><a href="#configuration">Study configuration</a></li>
<li><a href="#provenance">Provenance</a></li>
</ol></nav>
{% if found.rows or found.unmeasured %}
<section id="findings">
<h2>Findings{% if scale.reduced %} at reduced scale{% endif %}<a class="up"
 href="#contents">&uarr; contents</a></h2>
{% if found.rows %}
<p class="counts"><b>Paper tests</b> ({{ found.n_tests }} rows, {{ found.n_decided }} decided;
{{ found.n_claims }} claims), after Holm's adjustment over the study's rows. By claim:
{% for verdict, n, word in found.claim_counts %}
<span class="{{ verdict | vclass }}">{{ n }} {{ word }}</span>
{% endfor %}; by row:
{% for verdict, n, word in found.counts %}
<span class="{{ verdict | vclass }}">{{ n }} {{ word }}</span>
{% endfor %}.</p>
{% if found.apart %}<p class="apart"><b>Counted apart</b> (not statistical tests of a paper's
claim): {% for a in found.apart %}{{ a.kind }} ({{ a.means }}): {% for verdict, n, word in
a.counts %}{{ n }} {{ word }}{% if not loop.last %}, {% endif %}{% endfor %}{% if not loop.last
%}; {% endif %}{% endfor %}.</p>{% endif %}
<details class="meanings"><summary>What the verdicts mean</summary><dl>
{% for word, means in found.meanings %}<dt>{{ word }}</dt><dd>{{ means }}</dd>
{% endfor %}</dl>
<p>Effect: the paired per-seed difference, normalizer minus baseline, with its interval over
seeds at the level shown beside it (a replicated experiment's rows are read at a sequential
look's higher level). The verdict is the adjusted one (Holm's over the study's paper tests); seeds
needed: the seeds that would resolve the row at its observed effect and spread with 80% power;
detectable: the smallest distance from the rule's boundary the current seeds resolve with 80%
power. Each row links to the section holding its evidence.</p></details>
<details class="fold"><summary>Every paper test, row by row ({{ found.n_tests }} rows), each
linked to its evidence</summary>
<div class="scroll"><table class="found">
<tr><th class="l">claim</th><th class="l">evidence</th>
<th class="l">where (experiment: normalizer vs baseline)</th><th>verdict</th>
<th>effect [interval, its level]</th><th class="l">in words</th><th>seeds needed</th>
<th>detectable effect</th></tr>
{% for g in found.groups %}{% for r in g.rows %}
<tr data-claim="{{ r.claim_id }}" data-where="{{ r.where }}">
{% if loop.first %}<td class="l" rowspan="{{ g.rows | length }}"><b>{{ g.claim_id }}</b>:
 {{ g.claim }}</td><td class="l" rowspan="{{ g.rows | length }}">{% if g.section_anchor
%}<a href="#{{ g.section_anchor }}">{{ g.section }}</a>{% else %}{{ g.section }}{% endif %}</td>
{% endif %}
<td class="l">{% if r.anchor %}<a class="nw" href="#{{ r.anchor }}">{{ r.where }}</a>{%
 else %}<span class="nw">{{ r.where }}</span>{% endif %}{% if r.setting %}<br><small>{{
 r.setting }}</small>{% endif %}{% if r.kind != "paper test" %}<br><i>[{{ r.kind }}]</i>{%
 endif %}</td>
<td class="v {{ r.adjusted | vclass }}" title="{{ r.verdict_means }}. Rule: {{ r.rule }}">{{
 r.adjusted_word }}{% if r.adjusted != r.verdict %}<br><small>before adjustment: {{
 r.verdict_word }}</small>{% endif %}</td>
<td{% if r.has_effect %} class="nw"{% else %} class="l"{% endif %}>{{ r.effect }}</td>
<td class="l">{{ r.in_words }}{% if r.verdict_means %}<br><small>{{ r.verdict_means
}}</small>{% endif %}</td>
<td>{{ r.seeds_needed }}</td><td>{{ r.detectable }}</td>
</tr>{% endfor %}{% endfor %}
</table></div></details>
{% endif %}
{% if found.unmeasured %}<p class="unmeasured"><b>Not measured:</b> {% for u in found.unmeasured
%}{{ u.claim_id }} ({{ u.note }}){% if not loop.last %}; {% endif %}{% endfor %}.</p>{% endif %}
</section>
{% endif %}
{% for s in sections %}
<section id="{{ s.id }}">
<h2>{{ s.title }}<a class="up" href="#contents">&uarr; contents</a></h2>
{% if s.headline %}<p class="headline"><b>Claims read here.</b> {{ s.headline }}</p>
{% endif %}
{% for g in s.groups %}
{% if g.heading %}<h3 id="{{ g.id }}">{{ g.heading }}</h3>{% endif %}
{% for f in g.figures %}<figure id="{{ f.id }}">
<img alt="{{ f.alt }}" src="data:image/png;base64,{{ f.data }}">
<figcaption>{{ f.caption }}</figcaption></figure>
{% endfor %}{% endfor %}
{% if s.findings %}<p><b>Findings.</b> {{ s.findings }}</p>{% endif %}
<details class="section"><summary>Method{% if s.table %} and summary table{% endif
%}</summary>
<p>{{ s.text }}</p>
{% if s.table %}<p>Summary: mean &plusmn; half-width of the {{ level_pct }} CI over seeds.</p>
<div class="scroll">{{ s.table | safe }}</div>{% endif %}
</details>
</section>
{% endfor %}
{% if rounds %}
<section id="rounds">
<h2>Replication rounds<a class="up" href="#contents">&uarr; contents</a></h2>
<p>Experiments with a replication policy added seeds in planned rounds until every ledger row
over their runs was decided (after the multiplicity adjustment) or the last round was reached.
Each row's interval at a round is at that look's level (the overall error split over the
planned rounds), so stopping early keeps the ledger's error rate. Each cell: the row's adjusted
verdict at that round.</p>
{% for r in rounds %}<p><b>{{ r.text }}</b></p>
<div class="scroll">{{ r.table | safe }}</div>
{% endfor %}
</section>
{% endif %}
{% if variance %}
<section id="variance">
<h2>More seeds or more probes?<a class="up" href="#contents">&uarr; contents</a></h2>
<p>Where each measure's per-run noise comes from: for each experiment and normalizer, how many of
the quantities the ledger reads have a variance dominated by the spread between seeds (more
seeds help) or by the within-run sample (raising the option named helps without training more
runs), and the median share of the within-run part (a one-way random-effects split per
quantity; <code>python -m bnstudy variance results/tables/&lt;measure&gt;.parquet</code> prints
every quantity).</p>
<div class="scroll">{{ variance | safe }}</div>
</section>
{% endif %}
{% if ledger %}
<section id="claims">
<h2>Full claims ledger<a class="up" href="#contents">&uarr; contents</a></h2>
<details class="ledger"><summary>Every row of the ledger, unmeasured ones included, with its
quantity, rule, both sides' means and notes ({{ ledger | length }} rows)</summary>
<p>Each claim of the papers against this study's numbers. The effect is the paired per-seed
difference of the stated quantity (normalizer minus baseline), with its Student-t interval over
seeds (at the level shown beside it) and Cohen's d_z; the verdict follows the stated rule from
the interval alone (the adjusted verdict, where it differs, after Holm's correction over the
study's rows). 'not
measured' means the study did not run what the claim needs. Rows marked [implementation check]
hold by construction (they check the measurement, not the paper); Luo rows name the closed form
and constant they are compared with.</p>
<div class="scroll"><table>
<tr><th class="l">id</th><th class="l">paper</th><th class="l">claim</th><th class="l">quantity</th>
<th>where</th><th>mean: normalizer vs baseline</th><th>effect [CI]</th><th>verdict</th>
<th class="l">rule</th></tr>
{% for r in ledger %}<tr><td class="l">{% if r.anchor
%}<a href="#{{ r.anchor }}">{{ r.claim_id }}</a>{% else %}{{ r.claim_id }}{% endif %}</td>
<td class="l">{{ r.paper }}{% if r.check %} <i>[{{ r.check }}]</i>{% endif %}</td>
<td class="l">{{ r.claim }}</td>
<td class="l">{{ r.quantity }}{% if r.curve %}<br><i>curve: {{ r.curve }}</i>{% endif %}</td>
<td>{{ r.where }}</td><td>{{ r.means }}</td><td>{{ r.effect_full }}</td>
<td class="v {{ r.verdict | vclass }}">{{ r.verdict_word }}{% if r.adjusted != r.verdict
%}<br><i>adjusted: {{ r.adjusted_word }}</i>{% endif %}</td>
<td class="l">{{ r.rule }}. {{ r.note }}{% if r.deviations %}<br><i>differs from the paper:
{{ r.deviations }}</i>{% endif %}</td></tr>
{% endfor %}</table></div></details>
</section>
{% endif %}
<section id="configuration">
<h2>Study configuration<a class="up" href="#contents">&uarr; contents</a></h2>
<details class="fold"><summary>The study config as checked, defaults filled in</summary>
<pre>{{ config_yaml }}</pre></details>
</section>
<section id="provenance">
<h2>Provenance<a class="up" href="#contents">&uarr; contents</a></h2>
<details class="fold"><summary>Where each table comes from (config hash, versions, device, git
commit)</summary>
<div class="scroll">{{ provenance | safe }}</div></details>
</section>
</main></body></html>
"""
