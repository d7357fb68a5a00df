"""template_cases.py: the hand-written template cases (one per construct, filter, test and method chat
templates use, and the errors), with the output Debian's jinja2 gives, as tests/data/templates/constructs.jsonl.

usage: /usr/bin/python3 tests/py/template_cases.py [OUT.jsonl]
Each line: {"template", "vars", and "want" (the rendering) or "error" + "type" (jinja2's exception)}.
test_template checks rlc's engine against the stored lines, and against jinja2 again when it is installed.
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from jinja_render import make_env  # noqa: E402

M = [{"role":"system","content":"Be brief."},{"role":"user","content":"Hi \"there\" 'x' é ü 中文 😀\n\ttab"},{"role":"assistant","content":"Hello!","tool_calls":[{"type":"function","function":{"name":"get","arguments":{"city":"Paris","n":3,"f":2.5,"ok":True,"none":None,"list":[1,"a"]}}}]}]
V = {"messages": M, "s": "  Hello World  ", "n": 7, "f": 2.5, "xs": [3, 1, 2], "d": {"b": 2, "a": 1, "c": [1, 2]}, "e": "", "t": True, "words": ["a", "b", "c"], "u": "ünïcode ß straße", "nl": "a\nb\n\nc", "neg": -7}
cases = [
 # data, whitespace control, trim/lstrip
 ("plain text\nline2\n", {}),
 ("a {{- ' b ' -}} c", {}),
 ("  {% if true %}\n  x\n  {% endif %}\nend", {}),
 ("  {%+ if true %}x{% endif %}", {}),
 ("{% if true -%}\n\n   x  {%- endif %}|", {}),
 ("a\n{# comment #}\nb\n  {# c2 #}\nc", {}),
 ("a {#- c -#}   b", {}),
 ("{% raw %}{{ x }}{% endraw %}", {}),
 ("line\r\nwin\rmac\n", {}),
 ("{{ 'x' }}\n{{ 'y' }}\n", {}),
 ("{% for i in xs %}\n  {{ i }}\n{% endfor %}\n", V),
 # literals and expressions
 ("{{ 1 }} {{ -2 }} {{ 1.5 }} {{ 1e3 }} {{ 0.1 + 0.2 }} {{ 10 / 4 }} {{ 10 // 4 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 2 ** 10 }} {{ 7 % -3 }}", {}),
 ("{{ 'a' ~ 1 ~ none ~ true }} {{ 'ab' * 3 }} {{ [1] + [2, 'x'] }} {{ 'a' + 'b' }}", {}),
 ("{{ none }} {{ true }} {{ false }} {{ [] }} {{ {} }} {{ [1, 'a', none, true, 1.0] }} {{ {'a': 1, 'b': [2]} }} {{ (1, 2) }} {{ (1,) }}", {}),
 ("{{ \"it's\" }} {{ ['it\\'s', \"q\\\"\", 'back\\\\slash', 'nl\\n'] }}", {}),
 ("{{ 'a' 'b' }} {{ '\\u00e9\\x41\\101' }} {{ '\\d' }}", {}),
 ("{{ 1 < 2 < 3 }} {{ 1 < 2 > 3 }} {{ 'a' < 'b' }} {{ [1,2] < [1,3] }} {{ 1 == 1.0 }} {{ 'a' != 'a' }} {{ 2 >= 2 }}", {}),
 ("{{ 'b' in 'abc' }} {{ 2 in xs }} {{ 'a' in d }} {{ 'z' not in d }} {{ 5 not in xs }}", V),
 ("{{ not true }} {{ true and 'x' }} {{ '' or 'y' }} {{ 0 or [] }} {{ none and 1 }} {{ not e }}", V),
 ("{{ 'y' if t else 'n' }} {{ 'y' if e else 'n' }} [{{ 'y' if e }}] {{ 1 if false else 2 if true else 3 }}", V),
 ("{{ xs[0] }} {{ xs[-1] }} {{ xs[1:] }} {{ xs[::-1] }} {{ xs[:2] }} {{ xs[5] }} {{ s[2:7] }} {{ u[0:3] }} {{ u[::-1] }} {{ xs[-5:10] }} {{ xs[::2] }}", V),
 ("{{ d.a }} {{ d['b'] }} {{ d.c[1] }} {{ messages[0].role }} {{ messages[2]['tool_calls'][0].function.name }} {{ xs.0 }}", V),
 ("{{ d.zz }}|{{ d.zz is defined }}|{{ missing }}|{{ missing is undefined }}|{{ messages[0].nope is none }}", V),
 ("{{ n + 1 }} {{ n - 10 }} {{ n * f }} {{ n / 2 }} {{ f // 1 }} {{ -f }} {{ +n }} {{ n % 4 }} {{ 2 ** -1 }}", V),
 # statements
 ("{% if n > 5 %}big{% elif n > 2 %}mid{% else %}small{% endif %} {% if e %}E{% elif not e %}notE{% endif %}", V),
 ("{% for x in xs %}{{ loop.index }}/{{ loop.index0 }}/{{ loop.revindex }}/{{ loop.revindex0 }}/{{ loop.first }}/{{ loop.last }}/{{ loop.length }}:{{ x }} {% endfor %}", V),
 ("{% for x in xs if x > 1 %}{{ loop.index }}:{{ x }}{{ loop.length }} {% endfor %}", V),
 ("{% for x in [] %}x{% else %}empty{% endfor %} {% for x in xs %}{{ x }}{% else %}no{% endfor %}", V),
 ("{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %} {% for k in d %}{{ k }}{% endfor %} {% for ch in 'héllo' %}{{ ch }}.{% endfor %}", V),
 ("{% for x in xs %}{% if x == 1 %}{% continue %}{% endif %}{% if x == 2 %}{% break %}{% endif %}{{ x }}{% endfor %}", V),
 ("{% for x in xs %}{{ loop.previtem }}-{{ loop.nextitem }}-{{ loop.cycle('a','b') }} {% endfor %}", V),
 ("{% for a in [1,2] %}{% for b in [3,4] %}{{ a }}{{ b }}{{ loop.index }} {% endfor %}{{ loop.index }}|{% endfor %}", {}),
 ("{% set x = 5 %}{{ x }} {% set a, b = 1, 2 %}{{ a }}{{ b }} {% set y %}block {{ x }}{% endset %}[{{ y }}]", {}),
 ("{% set ns = namespace(found=false, n=0) %}{% for x in xs %}{% if x == 1 %}{% set ns.found = true %}{% endif %}{% set ns.n = ns.n + x %}{% endfor %}{{ ns.found }} {{ ns.n }}", V),
 ("{% set x = 1 %}{% for i in xs %}{% set x = i %}{% endfor %}{{ x }}", V),
 ("{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}{{ greet('Bob') }} {{ greet('Al', punct='?') }} {{ greet(name='Z') }}", {}),
 ("{% macro wrap(tag) %}<{{ tag }}>{{ caller() }}</{{ tag }}>{% endmacro %}{% call wrap('b') %}inner {{ 1 + 1 }}{% endcall %}", {}),
 ("{% macro m(x) %}{{ x }}{% endmacro %}{% macro m2() %}[{{ m(2) }}]{% endmacro %}{{ m2() }}", {}),
 ("{% filter upper %}shout {{ 'this' }}{% endfilter %} {% set z | trim %}   padded   {% endset %}[{{ z }}]", {}),
 ("{% with a = 1, b = 2 %}{{ a + b }}{% endwith %}", {}),
 ("{% generation %}gen {{ 1 }}{% endgeneration %}", {}),
 # filters
 ("{{ s|trim }}|{{ s|trim('  Hd') }}|{{ s|length }}|{{ xs|length }}|{{ d|length }}|{{ u|length }}|{{ missing|length }}|{{ xs|count }}", V),
 ("{{ s|upper }}|{{ s|lower }}|{{ u|upper }}|{{ 'hello world-foo(bar'|title }}|{{ 'hELLO'|capitalize }}|{{ s|replace('l', 'L') }}|{{ s|replace('l', 'L', 2) }}", V),
 ("{{ xs|join(', ') }}|{{ words|join }}|{{ [1, none, 'a']|join('-') }}|{{ messages|map(attribute='role')|join(',') }}", V),
 ("{{ messages|selectattr('role', 'equalto', 'user')|list|length }}|{{ messages|rejectattr('role', 'eq', 'user')|map(attribute='role')|list }}|{{ messages|selectattr('tool_calls', 'defined')|list|length }}", V),
 ("{{ xs|select('odd')|list }}|{{ xs|reject('odd')|list }}|{{ [0, 1, '', 'a']|select|list }}|{{ xs|map('string')|list }}|{{ words|map('upper')|join }}", V),
 ("{{ missing|default('dflt') }}|{{ e|default('dflt') }}|{{ e|default('dflt', true) }}|{{ n|d(3) }}|{{ none|default('x') }}", V),
 ("{{ d|items|list }}|{{ d|dictsort }}|{{ xs|sort }}|{{ xs|sort(reverse=true) }}|{{ words|first }}|{{ words|last }}|{{ xs|reverse|list }}|{{ 'abc'|reverse }}|{{ 'abc'|list }}", V),
 ("{{ '42'|int }}|{{ ' 7 '|int }}|{{ '3.9'|int }}|{{ 'x'|int }}|{{ 'x'|int(5) }}|{{ 3.7|int }}|{{ '2.5'|float }}|{{ 'a'|float }}|{{ 3|float }}|{{ true|int }}", {}),
 ("{{ n|string ~ 'x' }}|{{ xs|string }}|{{ none|string }}|{{ -3|abs }}|{{ 2.567|round(2) }}|{{ 2.5|round }}|{{ xs|sum }}|{{ xs|max }}|{{ xs|min }}|{{ [1,1,2]|unique|list }}", V),
 ("{{ nl|indent }}|{{ nl|indent(2, true) }}|{{ nl|indent('>>', first=true, blank=true) }}", V),
 ("{{ '<a href=\"x\">&\\'</a>'|e }}|{{ 'hello big world'|wordcount }}|{{ xs|batch(2)|list }}", {}),
 ("{{ d|tojson }}|{{ messages[1]|tojson }}|{{ xs|tojson(indent=2) }}|{{ d|tojson(indent=4) }}|{{ d|tojson(sort_keys=true) }}|{{ d|tojson(separators=(',', ':')) }}|{{ [] |tojson(indent=2) }}|{{ {}|tojson }}", V),
 ("{{ messages[2].tool_calls[0].function.arguments|tojson }}|{{ 'ctl\\x01\\x7f\\u2028'|tojson }}|{{ 1.0|tojson }}|{{ 1e20|tojson }}|{{ 1e-7|tojson }}|{{ 0.5|tojson }}|{{ none|tojson }}|{{ true|tojson }}", V),
 ("{{ d|tojson(indent='\\t') }}|{{ d|tojson(indent=0) }}", V),
 # tests
 ("{{ n is number }} {{ f is float }} {{ n is integer }} {{ t is boolean }} {{ t is true }} {{ e is false }} {{ s is string }} {{ d is mapping }} {{ xs is sequence }} {{ d is iterable }} {{ n is iterable }} {{ none is none }} {{ t is number }}", V),
 ("{{ n is odd }} {{ n is even }} {{ 9 is divisibleby 3 }} {{ n is eq 7 }} {{ n is equalto(7) }} {{ n is ne 7 }} {{ n is gt 3 }} {{ n is lt 3 }} {{ 1 is in xs }} {{ 'abc' is lower }} {{ 'ABC' is upper }} {{ n is not defined }}", V),
 ("{{ 'upper' is filter }} {{ 'nope' is filter }} {{ 'odd' is test }} {{ d is callable }} {{ messages[0].role is sameas 'x' }} {{ none is sameas none }}", V),
 # methods
 ("{{ s.strip() }}|{{ s.lstrip() }}|{{ s.rstrip() }}|{{ '\\n\\nx\\n'.strip('\\n') }}|{{ 'xxhixx'.strip('x') }}|{{ s.split() }}|{{ 'a,b,,c'.split(',') }}|{{ 'a b c'.split(' ', 1) }}|{{ 'a b c'.rsplit(' ', 1) }}", V),
 ("{{ s.startswith('  He') }} {{ s.endswith(('x', '  ')) }} {{ s.upper() }} {{ s.lower() }} {{ s.replace('l', '') }} {{ 'hello world'.title() }} {{ 'hello'.capitalize() }} {{ s.find('W') }} {{ s.count('l') }}", V),
 ("{{ d.keys()|list }} {{ d.values()|list }} {{ d.items()|list }} {{ d.get('a') }} {{ d.get('zz') }} {{ d.get('zz', 5) }} {{ ', '.join(words) }} {{ '{} and {}'.format(1, 'b') }} {{ nl.splitlines() }}", V),
 ("{{ '12'.isdigit() }} {{ 'ab'.isalpha() }} {{ ' '.isspace() }} {{ xs.index(2) }} {{ xs.count(3) }}", V),
 # globals
 ("{{ range(3)|list }} {{ range(1, 7, 2)|list }} {{ range(5, 0, -2)|list }} {% for i in range(2) %}{{ i }}{% endfor %} {{ dict(a=1, b='x') }}", {}),
 # errors: each must fail
 ("{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}", {}),
 ("{% if messages[0]['role'] != 'x' %}{{ raise_exception('bad role: ' + messages[0]['role']) }}{% endif %}", V),
 ("{{ x|nosuchfilter }}", {}),
 ("{{ x is nosuchtest }}", {}),
 ("{% if x %}unclosed", {}),
 ("{% for x in %}{% endfor %}", {}),
 ("{{ 1 + }}", {}),
 ("{% endif %}", {}),
 ("{{ missing.attr }}", {}),
 ("{{ 1 + 'a' }}", {}),
 ("{{ 1 / 0 }}", {}),
 ("{% include 'x' %}", {}),
 ("{{ xs.append(4) }}", V),
 ("{{ missing + 1 }}", {}),
 ("{{ 'a' ~ }}", {}),
 ("{% set ns2 = 1 %}{% set ns2.x = 1 %}", {}),
 ("{{ unclosed", {}),
 ("{# unclosed comment", {}),
 ("{{ 'abc' }", {}),
 ("{{ (1 }}", {}),
]
cases += [
 ("{{ 'straße'|upper }} {{ 'ß'|title }} {{ 'ﬁne'.upper() }} {{ 'İ'.lower() }} {{ 'hello wORLD 1st'.title() }}", {}),
 ("{{ '%s'|length }} {{ 'x'|center if false else 'y' }}", {}),
 ("{% for m in messages %}{{ loop.index }}{% if loop.first %}F{% endif %}{% if loop.last %}L{% endif %}{% endfor %}", V),
 ("{% for m in messages|selectattr('role', 'in', ['user', 'system']) %}{{ m.role }},{% endfor %}", V),
 ("{% set l = [] %}{% for i in range(3) %}{% set l = l + [i * 2] %}{% endfor %}{{ l }}", {}),
 ("{% macro rec(n) %}{% if n > 0 %}{{ n }}{{ rec(n - 1) }}{% endif %}{% endmacro %}{{ rec(5) }}", {}),
 ("{% macro m(a, b=2) %}{{ a }}-{{ b }}-{{ c is defined }}{% endmacro %}{{ m(1) }}|{{ m(1, 3) }}|{{ m() }}", {}),
 ("{{ messages[1].content.split('\\n')[0] }}|{{ messages[1].content[-3:] }}|{{ messages[1]['content'] | wordcount }}", V),
 ("{%- if true -%}\n  a  \n{%- endif -%}\n  b", {}),
 ("{% for x in xs -%}\n  {{ x }}\n{%- endfor %}", V),
 ("x{#- c #}\n  y{# c2 -#}   z", {}),
 ("{{ d|dictsort(reverse=true) }}|{{ d|dictsort(by='value') if false else '' }}|{{ {'B': 1, 'a': 2}|dictsort }}", V),
 ("{{ [3, 'a']|sort if false else 'skip' }} {{ ['b', 'A', 'c']|sort }} {{ ['b', 'A', 'c']|sort(case_sensitive=true) }}", {}),
 ("{{ messages|map(attribute='content')|map('length')|list }}", V),
 ("{{ none is none }} {{ 0 is false }} {{ 1 is true }} {{ [] is iterable }} {{ '' is sequence }} {{ 1.5 is integer }}", {}),
 ("{{ 'a' if 1 in [1.0] }} {{ {1: 'x'}[1] }} {{ {1: 'x'}[1.0] }}", {}),
 ("{{ true + 1 }} {{ 3 // 2.0 }} {{ -3 % 2.5 }} {{ 2 ** 0.5 }} {{ 1e16 }} {{ 123456789012345678 }} {{ 0.1 * 3 }} {{ 1/3 }}", {}),
 ("{{ d }} {{ d.items()|list }} {{ (d|items|list)[0] }} {{ ('a', 1) }} {{ [(1, 2)] }} {{ {'k': none} }} {{ [\"it's\"] }} {{ ['a\\'b\"c'] }}", V),
 ("{{ xs|join(', ', attribute=none) }} {{ messages|join('|', attribute='role') }}", V),
 ("{{ messages[0]|tojson(indent=2, sort_keys=true) }}", V),
 ("{{ 'a,b'.split(',')|tojson }} {{ range(3)|list|tojson }} {{ (1, 2)|tojson }} {{ 'é'|tojson }}", {}),
 ("{% set x %}{% for i in range(3) %}{{ i }}{% endfor %}{% endset %}{{ x|length }}{{ x }}", {}),
 ("{% if not messages %}empty{% elif messages|length > 5 %}long{% else %}{{ messages|length }}{% endif %}", V),
 ("{{ xs|first }} {{ []|first is undefined }} {{ d|first }} {{ 'abc'|first }} {{ 'abc'|last }}", V),
 ("{{ 'A'|lower is lower }} {{ 5|string|length }} {{ [1,2,3][1:]|sum }} {{ [0.5, 1.5]|sum }}", {}),
 ("{% for k, v in {'a': [1, 2], 'b': {'c': 3}}.items() %}{{ k }}={{ v|tojson }};{% endfor %}", {}),
 ("{{ messages[2].tool_calls[0].function.arguments.items()|list|length }} {{ messages[2].tool_calls|length }}", V),
 ("{% for m in messages %}{% if m.tool_calls is defined %}{% for tc in m.tool_calls %}{{ tc.function.name }}({{ tc.function.arguments|tojson }}){% endfor %}{% endif %}{% endfor %}", V),
 ("{{ 'x' ~ 1.0 ~ 2.50 ~ -0.0 ~ 1e-05 ~ 1e100 }}", {}),
 ("{{ '\\n'|tojson }} {{ 'tab\\there'|tojson }} {{ '\\u00e9'|tojson }}", {}),
 ("{{ loop }}", {}),
 ("{% for i in [1] %}{{ loop.changed(1) }}{% endfor %}", {}),
 ("{% extends 'base' %}", {}),
 ("{% import 'x' as y %}", {}),
 ("{% block b %}x{% endblock %}", {}),
 ("{{ 'x'|indent(2, first=true) }}|{{ 'a\\n\\nb'|indent(2, blank=false) }}", {}),
 ("{{ messages|selectattr('content')|list|length }} {{ messages|rejectattr('tool_calls')|list|length }}", V),
 ("{{ xs|map('int')|list }} {{ ['1', 'x', '2.5']|map('int')|list }} {{ ['1', 'x']|map('float')|list }}", V),
 ("{{ d['a'] + d.b }} {{ d.get('c', [])|length }} {{ 'b' in d.keys() }} {{ 2 in d.values() }}", V),
 ("{{ messages[-1].role }} {{ messages[-5] is defined }} {{ messages[10] is undefined }}", V),
 ("{{ 'abc'[::-1] }} {{ 'abc'[5:] }} {{ 'héllo'[1] }} {{ [1,2,3][-2:] }} {{ [1,2,3][:-1] }} {{ [1,2,3][::-2] }}", {}),
 ("{{ '  x  '.strip(' x') }}|{{ 'aXbXc'.split('X', 1) }}|{{ 'a  b'.split(' ') }}|{{ ''.split() }}|{{ ''.split(',') }}", {}),
 ("{% set ns = namespace(items=[]) %}{% for i in range(3) %}{% set ns.items = ns.items + [i] %}{% endfor %}{{ ns.items }}", {}),
 ("{% for i in range(5) %}{% if i is even %}{% continue %}{% endif %}{{ i }}{% if i > 2 %}{% break %}{% endif %}{% endfor %}", {}),
 ("{% for a, b in [[1, 2], [3, 4]] %}{{ a + b }},{% endfor %}", {}),
 ("{{ [1, 2] == [1, 2] }} {{ {'a': 1} == {'a': 1} }} {{ 'a' == 'a' }} {{ none == none }} {{ 1 != 1.0 }}", {}),
]


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "templates", "constructs.jsonl")
    env = make_env()
    with open(out, "w", encoding="utf-8") as f:
        for t, v in cases:
            rec = {"template": t, "vars": v}
            try:
                rec["want"] = env.from_string(t).render(**v)
            except Exception as e:
                rec["error"] = str(e)
                rec["type"] = type(e).__name__
            f.write(json.dumps(rec, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
