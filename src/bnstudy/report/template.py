"""The Jinja2 template of the HTML report (kept as a Python constant so that the report rule's
code hash, which covers the modules report.py imports, covers the template too).

The context is built by :func:`bnstudy.report.build.build`: ``title``, ``intro`` (runs,
experiments),
``found`` (the summary of the claims ledger, :mod:`bnstudy.report.summary`), ``sections`` (only
those with a figure or a summary table), ``ledger`` (every row), ``config_yaml`` and
``provenance``. Strings marked safe (pandas tables, findings) are HTML already; everything else
is escaped by autoescaping.
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
.scroll{overflow-x:auto;max-width:100%;margin:.5em 0}
table{border-collapse:collapse;font-size:.84em}
td,th{border:1px solid #ccc;padding:3px 7px;text-align:right;vertical-align:top}
th{background:#f0f0f0;position:sticky;top:0} td.l,th.l{text-align:left}
pre{background:#f6f6f6;padding:.8em;overflow-x:auto;font-size:.8em}
nav.toc{background:#f4f6f8;border:1px solid #dde;border-radius:4px;padding:.6em 1.2em;
 margin:1.5em 0}
nav.toc ol{columns:2 22em;margin:.3em 0;padding-left:1.4em} nav.toc li{margin:.15em 0}
.up{font-size:.75em;font-weight:normal;margin-left:.6em}
.v{font-weight:bold;white-space:nowrap} .nw{white-space:nowrap}
details summary{cursor:pointer} table.found td{font-size:.95em}
.v-supported{background:#d4edda} .v-not-supported{background:#f8d7da}
.v-inconclusive{background:#fff3cd} .v-not-measured{background:#e2e3e5}
.unmeasured{font-size:.92em;color:#444}
.counts span{display:inline-block;padding:1px 8px;margin-right:.4em;border-radius:3px}
"""

TEMPLATE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{ title }}</title><style>{{ css }}</style></head>
<body><main>
<h1 id="top">{{ title }}</h1>
<section id="summary">
<h2>What the study found</h2>
{% for p in prose %}<p class="prose">{{ p }}</p>
{% endfor %}<details><summary>{{ intro.text }}</summary>
<ul>{% for e in intro.experiments %}<li><b>{{ e.name }}</b>: {{ e.dataset }} / {{ e.model }},
 normalizers {{ e.norms }}, seeds {{ e.seeds }}</li>{% endfor %}</ul></details>
{% if found.rows %}
<p class="counts">Claims of the papers tested against this study's numbers, after Holm's
adjustment over the study's rows. By claim ({{ found.n_claims }}):
{% for verdict, n in found.claim_counts %}
<span class="{{ verdict | vclass }}">{{ n }} {{ verdict }}</span>
{% endfor %}; by row:
{% for verdict, n in found.counts %}
<span class="{{ verdict | vclass }}">{{ n }} {{ verdict }}</span>
{% endfor %}{% if found.check_counts %}; implementation checks (hold by construction, counted
apart): {% for verdict, n in found.check_counts %}{{ n }} {{ verdict }}{% if not loop.last %},
{% endif %}{% endfor %}{% endif %}. (effect: paired per-seed difference, normalizer minus
baseline, with its
{{ level_pct }} CI over seeds; the verdict is the row's own, the adjusted one Holm's over the
study's rows; seeds needed: the seeds that would resolve the row at its observed effect and
spread with 80% power; detectable: the smallest distance from the rule's boundary the current
seeds resolve with 80% power; each row links to the section holding its evidence).</p>
<div class="scroll"><table class="found">
<tr><th class="l">claim</th><th class="l">evidence</th>
<th class="l">where (experiment: normalizer vs baseline)</th><th>verdict</th>
<th>adjusted verdict</th><th>effect [{{ level_pct }} CI]</th><th class="l">in words</th>
<th>seeds needed</th>
<th>detectable effect</th></tr>
{% for g in found.groups %}{% for r in g.rows %}
<tr data-claim="{{ r.claim_id }}" data-where="{{ r.where }}">
{% if loop.first %}<td class="l" rowspan="{{ g.rows | length }}"><b>{{ g.claim_id }}</b>:
 {{ g.claim }}</td><td class="l" rowspan="{{ g.rows | length }}">{% if g.section_anchor
%}<a href="#{{ g.section_anchor }}">{{ g.section }}</a>{% else %}{{ g.section }}{% endif %}</td>
{% endif %}
<td class="l nw">{% if r.anchor %}<a href="#{{ r.anchor }}">{{ r.where }}</a>{%
 else %}{{ r.where }}{% endif %}</td><td class="v {{ r.verdict | vclass }}"
 title="{{ r.verdict_means }}. Rule: {{ r.rule }}">{{ r.verdict }}</td>
<td class="v {{ r.adjusted | vclass }}" title="{{ r.verdict_means }}">{{ r.adjusted }}</td>
<td{% if r.has_effect %} class="nw"{% else %} class="l"{% endif %}>{{ r.effect }}</td>
<td class="l">{{ r.in_words }}{% if r.verdict_means %}<br><small>{{ r.verdict_means
}}</small>{% endif %}</td>
<td>{{ r.seeds_needed }}</td><td>{{ r.detectable }}</td>
</tr>{% endfor %}{% endfor %}
</table></div>
{% endif %}
{% if found.unmeasured %}<p class="unmeasured"><b>Not measured:</b> {% for u in found.unmeasured
%}{{ u.claim_id }} ({{ u.note }}){% if not loop.last %}; {% endif %}{% endfor %}.</p>{% endif %}
</section>
<nav class="toc" id="contents"><b>Contents</b><ol>
<li><a href="#summary">What the study found</a></li>
{% for s in sections %}<li><a href="#{{ s.id }}">{{ s.title }}</a></li>
{% endfor %}{% if rounds %}<li><a href="#rounds">Replication rounds</a></li>{% endif %}
{% if variance %}<li><a href="#variance">More seeds or more probes?</a></li>{% endif %}
{% if ledger %}<li><a href="#claims">Claims ledger</a></li>{% endif %}
<li><a href="#configuration">Study configuration</a></li>
<li><a href="#provenance">Provenance</a></li>
</ol></nav>
{% for s in sections %}
<section id="{{ s.id }}">
<h2>{{ s.title }}<a class="up" href="#contents">&uarr; contents</a></h2>
{% if s.headline %}<p class="headline"><b>Claims read here.</b> {{ s.headline }}</p>
{% endif %}<details class="section"><summary>Method, figures{% if s.findings %}, findings{% endif
%}{% if s.table %} and summary table{% endif %}</summary>
<p>{{ s.text }}</p>
{% for g in s.groups %}
{% if g.heading %}<h3 id="{{ g.id }}">{{ g.heading }}</h3>{% endif %}
{% for f in g.figures %}<figure id="{{ f.id }}">
<img alt="{{ f.alt }}" src="data:image/png;base64,{{ f.data }}">
<figcaption>{{ f.caption }}</figcaption></figure>
{% endfor %}{% endfor %}
{% if s.findings %}<p><b>Findings.</b> {{ s.findings | safe }}</p>{% endif %}
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
<h2>Claims ledger<a class="up" href="#contents">&uarr; contents</a></h2>
<p>Each claim of the papers against this study's numbers. The effect is the paired per-seed
difference of the stated quantity (normalizer minus baseline), with its {{ level_pct }} Student-t
CI over seeds and Cohen's d_z; the verdict follows the stated rule from the CI alone (the
adjusted verdict, where it differs, after Holm's correction over the study's rows). 'not
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
<td class="v {{ r.verdict | vclass }}">{{ r.verdict }}{% if r.adjusted != r.verdict
%}<br><i>adjusted: {{ r.adjusted }}</i>{% endif %}</td>
<td class="l">{{ r.rule }}. {{ r.note }}</td></tr>
{% endfor %}</table></div>
</section>
{% endif %}
<section id="configuration">
<h2>Study configuration<a class="up" href="#contents">&uarr; contents</a></h2>
<pre>{{ config_yaml }}</pre>
</section>
<section id="provenance">
<h2>Provenance<a class="up" href="#contents">&uarr; contents</a></h2>
<div class="scroll">{{ provenance | safe }}</div>
</section>
</main></body></html>
"""
