"""The UI's HTML: small Jinja2 templates kept in code (nothing to package separately), autoescaped.

The templates only render the dicts of :mod:`deltaguard.plugins.service`; they decide nothing.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote, urlencode

import jinja2

from deltaguard.plugins.theme import theme_css

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;color:#1d2330;background:#f6f7f9;font-size:14px}
header{background:#13324b;color:#fff;padding:10px 20px;display:flex;gap:20px;align-items:center}
header a{color:#cfe3f5;text-decoration:none}header b{font-size:16px}
main{padding:16px 20px;max-width:1400px}
.card{background:#fff;border:1px solid #dde1e6;border-radius:6px;padding:12px 16px;margin-bottom:14px}
.card.overrun{border-color:#c0392b;background:#fdecea}
h1{font-size:20px;margin:4px 0 12px}h2{font-size:16px;margin:4px 0 8px}h3{font-size:14px;margin:12px 0 6px}
table.list{border-collapse:collapse;width:100%}table.list th,table.list td{border-bottom:1px solid #eceff2;padding:5px 8px;text-align:left;vertical-align:top}
table.list th{background:#f0f2f5;font-weight:600}
table.list{table-layout:fixed}table.list td{overflow-wrap:anywhere}
table.list col.n{width:34px}col.task{width:22%}col.op{width:18%}col.age{width:80px}col.why{width:34%}col.when{width:190px}
.muted{color:#667085}.uri{font-family:ui-monospace,monospace;font-size:12px;color:#475467}
.tag{display:inline-block;padding:1px 7px;border-radius:10px;font-size:12px;margin-right:4px}
.yes{background:#d1fadf;color:#05603a}.no{background:#fee4e2;color:#912018}.warn{background:#fef0c7;color:#93370d}
.stale{background:#fee4e2;color:#912018;font-weight:600}
.reason{color:#344054}.advice{color:#05603a}
dl.cfg{display:grid;grid-template-columns:220px 1fr;gap:3px 12px;margin:0}dl.cfg dt{color:#667085}dl.cfg dd{margin:0}
table.matrix{border-collapse:collapse;font-size:12px}table.matrix th{padding:3px 5px;background:#f0f2f5;white-space:nowrap}
table.matrix td{width:56px;height:24px;text-align:center;border:1px solid #fff;cursor:help}
td.ok{background:#a6e3b7}td.conflict{background:#f4a09a}
th.col{writing-mode:vertical-rl;transform:rotate(180deg);height:110px}
.tl{position:relative;height:18px;background:#f0f2f5;border-radius:3px}
.bar{position:absolute;top:2px;height:14px;border-radius:3px}.bar.waiting{background:#f7b955}.bar.writing{background:#3f8fd2}
.bar.open{background:repeating-linear-gradient(45deg,#3f8fd2,#3f8fd2 6px,#6aaee6 6px,#6aaee6 12px)}
button{background:#b42318;color:#fff;border:0;border-radius:4px;padding:4px 10px;cursor:pointer}
.headline{font-size:16px;font-weight:600}.granted{color:#05603a}.waited{color:#93370d}
form.lookup input{margin-right:6px}
"""

_BASE = """<!doctype html><html lang="en"><head><meta charset="utf-8">
<title>{% block title %}Delta leases{% endblock %}</title><style>{{ css }}{{ theme_css() }}</style></head><body>
<header><b>Delta leases</b><a href="{{ base }}/">Tables</a><a href="{{ base }}/decision">Decision for a task</a>
<a href="{{ base }}/docs">API</a><span class="muted" style="margin-left:auto">signed in as {{ user }}</span></header>
<main>{% block main %}{% endblock %}</main>
<script>
async function releaseStale(id){
  if(!confirm('Release the expired lease '+id+'? Its holder stopped heartbeating.'))return;
  const r=await fetch('{{ base }}/api/leases/'+encodeURIComponent(id)+'/release-stale',
    {method:'POST',credentials:'same-origin',headers:{'Content-Type':'application/json'},body:'{}'});
  const body=await r.json(); alert(r.ok?'released':('refused: '+(body.detail||r.status))); location.reload();
}
</script></body></html>"""

_MACROS = """
{% macro owner_link(o) -%}
<a href="{{ base }}/decision?{{ decision_query(o) }}" title="{{ o.run_id }} try {{ o.try_number }}">{{ o.describe }}</a>
{%- endmacro %}
{% macro config_block(c) -%}
{% if not c.known %}<p class="muted">{{ c.summary }} (engine: {{ c.engine }})</p>{% else %}
<dl class="cfg">
<dt>Engine</dt><dd>{{ c.engine }}</dd>
<dt>Isolation level</dt><dd>{{ c.isolation_level }} <span class="muted">({{ c.isolation_source }})</span></dd>
<dt>Partitions</dt><dd>{{ c.partitions_text }}</dd>
<dt>Deletion vectors</dt><dd><span class="tag {{ 'yes' if c.deletion_vectors else 'no' }}">{{ 'enabled' if c.deletion_vectors else 'disabled' }}</span></dd>
{% if c.clustering %}<dt>Liquid clustering</dt><dd>{{ c.clustering|join(', ') }}</dd>{% endif %}
<dt>Row-level concurrency</dt><dd><span class="tag {{ 'yes' if c.row_level_concurrency.enabled else 'no' }}">{{ 'yes' if c.row_level_concurrency.enabled else 'no' }}</span> {{ c.row_level_concurrency.why }}</dd>
{% for note in c.conservative %}<dt>Conservative</dt><dd><span class="tag warn">every pair conflicts</span> {{ note }}</dd>{% endfor %}
</dl>{% endif %}
{%- endmacro %}
{% macro leases_block(t) -%}
<h3>Active leases ({{ t.leases|length }})</h3>
{% if t.leases %}<table class="list"><colgroup><col class="task"><col class="op"><col class="age"><col><col class="age"><col></colgroup><tr><th>Owner task</th><th>Operation</th><th>Age</th><th>Expires</th><th>Fencing</th><th></th></tr>
{% for l in t.leases %}<tr class="lease"><td>{{ owner_link(l.owner) }}</td><td{% if l.operation_label %} title="app id {{ l.operation_label }}"{% endif %}>{{ l.operation }}</td><td>{{ '%.0f'|format(l.age_s) }} s</td>
<td>{% if l.stale %}<span class="tag stale">stale: expired {{ '%.0f'|format(-l.expires_in_s) }} s ago</span>{% else %}in {{ '%.0f'|format(l.expires_in_s) }} s{% endif %}</td>
<td>#{{ l.fencing }}</td><td>{% if l.stale %}<button onclick="releaseStale('{{ l.lease_id }}')">Release stale lease</button>{% endif %}</td></tr>{% endfor %}
</table>{% else %}<p class="muted">nobody holds this table</p>{% endif %}
<h3>Waiting ({{ t.waiting|length }})</h3>
{% if t.waiting %}<table class="list"><colgroup><col class="n"><col class="task"><col class="op"><col class="age"><col><col class="why"></colgroup><tr><th>#</th><th>Waiting task</th><th>Operation</th><th>Waiting for</th><th>Behind</th><th>Why</th></tr>
{% for w in t.waiting %}<tr class="waiter"><td>{{ w.position or '' }}</td><td>{{ owner_link(w.owner) }}</td><td>{{ w.operation }}</td>
<td>{% if w.waiting_s is not none %}{{ '%.0f'|format(w.waiting_s) }} s{% endif %}</td>
<td class="blockers">{% for b in w.blockers %}<div><b>{{ b.owner }}</b> <span class="muted">{{ b.operation }}{{ ', queued' if b.kind == 'waiting' }}</span></div>{% endfor %}</td>
<td><div class="reason">{% for r in w.reasons %}<div>{{ r }}</div>{% endfor %}</div>{% if w.exceptions %}<div class="muted">{{ w.exceptions|join(', ') }}</div>{% endif %}
{% if w.advice %}<div class="advice">Advice: {{ w.advice|join(' ') }}</div>{% endif %}</td></tr>{% endfor %}
</table>{% else %}<p class="muted">no queue</p>{% endif %}
{%- endmacro %}
"""

_TABLES = """{% extends "base" %}{% import "macros" as m with context %}
{% block title %}Delta leases: tables{% endblock %}{% block main %}
<h1>Delta leases: tables</h1>
{% if not data.tables %}<div class="card muted">No table yet: deltaguard has not admitted any write with this lease store.</div>{% endif %}
{% for t in data.tables %}<div class="card table-card" data-uri="{{ t.uri }}">
<h2><a href="{{ base }}/table?uri={{ t.uri|urlencode }}">{{ t.name }}</a> <span class="uri">{{ t.uri }}</span></h2>
{{ m.config_block(t.config) }}{{ m.leases_block(t) }}</div>{% endfor %}
{% if data.next_after %}<a href="{{ base }}/?after={{ data.next_after|urlencode }}">more tables</a>{% endif %}
{% endblock %}"""

_TABLE = """{% extends "base" %}{% import "macros" as m with context %}
{% block title %}Delta leases: {{ data.table.name }}{% endblock %}{% block main %}
{% set t = data.table %}
<h1>{{ t.name }} <span class="uri">{{ t.uri }}</span></h1>
{% if data.overruns %}<div class="card overrun"><h2>Possibly written outside a lease</h2>
<div class="muted">A write ended or committed after its lease was lost while another writer may have held the table: check it for lost or duplicated rows.</div>
<table class="list">{% for d in data.overruns %}<tr><td>{{ d.at_iso }}</td><td>{{ m.owner_link(d.owner) }}</td><td>{{ d.summary }}</td></tr>{% endfor %}</table></div>{% endif %}
<div class="card">{{ m.config_block(t.config) }}{{ m.leases_block(t) }}</div>
<div class="card"><h2>Conflict matrix: {{ data.matrix.engine }}{% if data.matrix.assumed_config %} (table configuration unknown: default table){% endif %}</h2>
<form class="lookup" method="get"><input type="hidden" name="uri" value="{{ t.uri }}">Engine
<select name="engine">{% for e in ['databricks','delta-spark','delta-rs'] %}<option{{ ' selected' if e in data.matrix.engine.lower() or (e=='databricks' and 'Databricks' in data.matrix.engine) }}>{{ e }}</option>{% endfor %}</select>
version <input name="version" size="6" placeholder="e.g. 14.3"><button type="submit" style="background:#13324b">show</button></form>
{% for note in data.matrix.notes %}<div class="muted">{{ note }}</div>{% endfor %}
<table class="matrix"><tr><th></th>{% for l in data.matrix.labels %}<th class="col">{{ l }}</th>{% endfor %}</tr>
{% for row in data.matrix.rows %}<tr><th style="text-align:right">{{ row.label }}</th>
{% for c in row.cells %}<td class="{{ 'conflict' if c.conflict else 'ok' }}" title="{{ c.a }} x {{ c.b }}: {{ c.reason }} [rule {{ c.rule }}]">{{ c.text }}</td>{% endfor %}</tr>{% endfor %}
</table><div class="muted">ok = cannot conflict; X = can conflict: {% for k, v in data.matrix.legend.items() %}{{ k }} = {{ v }}{{ ', ' if not loop.last }}{% endfor %}. Hover a cell for the reason.</div></div>
<div class="card"><h2>Timeline of recent writes{% if data.timeline.window %} <span class="muted">{{ data.timeline.window.from }} to {{ data.timeline.window.to }} ({{ data.timeline.window.seconds }} s)</span>{% endif %}</h2>
<div class="muted"><span class="tag" style="background:#f7b955">waiting</span><span class="tag" style="background:#3f8fd2;color:#fff">writing</span></div>
<table class="list">{% for r in data.timeline.rows %}<tr><td style="width:260px">{{ m.owner_link(r.owner) }}</td><td><div class="tl">
{% for b in r.bars %}<div class="bar {{ b.kind }}{{ ' open' if b.open }}" style="left:{{ b.left }}%;width:{{ b.width }}%" title="{{ b.kind }} {{ b.seconds }} s"></div>{% endfor %}
</div></td></tr>{% else %}<tr><td class="muted">no writes logged</td></tr>{% endfor %}</table></div>
<div class="card"><h2>Recent decisions</h2><table class="list"><colgroup><col class="when"><col class="age"><col class="task"><col></colgroup><tr><th>When (UTC)</th><th>Decision</th><th>Task</th><th>What</th></tr>
{% for d in data.decisions %}<tr><td>{{ d.at_iso }}</td><td>{{ d.kind }}</td><td>{{ m.owner_link(d.owner) }}</td><td>{{ d.summary }}</td></tr>{% endfor %}</table>
{% if data.next_before %}<a href="{{ base }}/table?uri={{ t.uri|urlencode }}&before={{ data.next_before }}">older decisions</a>{% endif %}</div>
{% endblock %}"""

_DECISION = """{% extends "base" %}{% import "macros" as m with context %}
{% block title %}Delta leases: decision{% endblock %}{% block main %}
<h1>Decision for a task instance</h1>
<form class="lookup card" method="get">DAG <input name="dag_id" value="{{ q.dag_id or '' }}"> run <input name="run_id" value="{{ q.run_id or '' }}" size="36">
task <input name="task_id" value="{{ q.task_id or '' }}"> map index <input name="map_index" value="{{ q.map_index if q.map_index is not none else -1 }}" size="3">
<button type="submit" style="background:#13324b">show</button></form>
{% if data %}
<div class="card"><div class="headline {{ 'granted' if data.attempts and data.attempts[-1].status == 'granted' and not data.attempts[-1].waited else 'waited' }}" id="headline">{{ data.headline }}</div>
<div class="muted">{{ data.task.dag_id }} / {{ data.task.run_id }} / {{ data.task.task_id }}{% if data.task.map_index >= 0 %} [{{ data.task.map_index }}]{% endif %}
 &middot; <a href="{{ ti_url }}">task instance in Airflow</a></div></div>
{% for a in data.attempts %}<div class="card attempt"><h2>Try {{ a.try_number }}: {{ a.status }}{% if a.waited %}, waited {{ '%.1f'|format(a.waited_s or 0) }} s{% endif %}</h2>
{% for uri, op in a.operations.items() %}<div><span class="uri">{{ uri }}</span>: {{ op }}</div>{% endfor %}
{% if a.granted_at %}<div>granted at {{ a.granted_at }} UTC</div>{% endif %}
{% for w in a.waits %}<h3>Waited on {{ w.table }} at {{ w.at }} (position {{ w.position }})</h3>
<table class="list"><tr><th>Behind</th><th>Their operation</th><th>Rule</th><th>Why</th><th>What to change</th></tr>
{% for b in w.blockers %}<tr class="blocker"><td><b>{{ b.owner }}</b>{{ ' (queued)' if b.kind == 'waiting' }}</td><td>{{ b.operation }}</td>
<td><code>{{ b.rule or '' }}</code></td><td class="reason">{{ b.rule_reason or w.reasons|join(' ') }}</td>
<td class="advice">{{ (b.rule_advice or w.advice)|join(' ') }}</td></tr>{% endfor %}</table>
{% if w.exceptions %}<div class="muted">Delta would raise: {{ w.exceptions|join(', ') }}</div>{% endif %}{% endfor %}
<h3>Log</h3><table class="list"><colgroup><col class="when"><col class="age"><col class="op"><col></colgroup>{% for d in a.log %}<tr><td>{{ d.at_iso }}</td><td>{{ d.kind }}</td><td>{{ d.table }}</td><td>{{ d.summary }}</td></tr>{% endfor %}</table>
</div>{% endfor %}{% endif %}
{% endblock %}"""

_ENV = jinja2.Environment(
    loader=jinja2.DictLoader(
        {"base": _BASE, "macros": _MACROS, "tables": _TABLES, "table": _TABLE, "decision": _DECISION}
    ),
    autoescape=True,
)


def decision_query(owner: dict[str, Any]) -> str:
    """The query string of the Decision page for an owner view."""
    return urlencode(
        {
            "dag_id": owner.get("dag_id", ""),
            "run_id": owner.get("run_id", ""),
            "task_id": owner.get("task_id", ""),
            "map_index": owner.get("map_index", -1),
        }
    )


def ti_url(dag_id: str, run_id: str, task_id: str, map_index: int, root: str = "") -> str:
    """The Airflow UI page of a task instance.

    :param root: the path Airflow is served under (``[api] base_url``'s path, ``""`` at the host's root).
    """
    url = f"{root}/dags/{quote(dag_id)}/runs/{quote(run_id, safe='')}/tasks/{quote(task_id)}"
    return f"{url}/mapped/{map_index}" if map_index >= 0 else url


_ENV.globals.update(css=_CSS, decision_query=decision_query, theme_css=theme_css)


def render(name: str, **context: Any) -> str:
    """Render one page (``tables``, ``table`` or ``decision``)."""
    return _ENV.get_template(name).render(**context)
