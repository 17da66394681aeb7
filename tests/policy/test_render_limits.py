"""Template size and time limits: hostile templates stop fast, with little memory, as jinja_limit."""

from __future__ import annotations

import time
import tracemalloc

import pytest

from compactor.policy.limits import MAX_VALUE_SECONDS
from compactor.policy.render import RenderProblem, render_text

FAST = {
    "repeat": "{{ 'x' * 100000000 }}",
    "repeat_power": "{{ 'x' * 10**9 }}",
    "list_repeat": "{{ [0] * 10**9 }}",
    "int_power": "{{ 2 ** (10 ** 9) }}",
    "int_product": "{{ (2 ** 900000) * (2 ** 900000) }}",
    "doubling": "{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
    "captured": "{% set b = 'x' * 1000000 %}{% set y %}{% for i in range(100000) %}{{ b }}{% endfor %}{% endset %}",
    "center": "{{ 'x'|center(10**9) }}",
    "indent": "{{ ('x\n' * 400000)|indent(10) }}",
    "replace_filter": "{{ ('x' * 1000000)|replace('x', 'xx') }}",
    "replace_method": "{{ 'xy'.replace('x', 'y' * 10**6) }}",
    "join_filter": "{{ range(100000)|join('x' * 100) }}",
    "join_method": "{{ ('-' * 10**6).join(['a', 'b', 'c']) }}",
    "sum_lists": "{{ [[1] * 1000000] * 100000|sum(start=[]) }}",
    "batch_fill": "{{ range(3)|batch(10**9, 'x')|list }}",
    "slice_fill": "{{ range(3)|slice(10**9, 'x')|list }}",
    "tojson_indent": "{{ [1, 2]|tojson(indent=10**9) }}",
    "format_width": "{{ '{:>999999999}'.format(1) }}",
    "printf_width": "{{ '%0999999999d' % 1 }}",
    "format_filter": "{{ '%0999999999d'|format(1) }}",
    "str_of_big_list": "{{ ['x' * 1000000] * 100 }}",
}


@pytest.mark.parametrize("template", FAST.values(), ids=FAST.keys())
def test_size_limits_stop_before_building_the_value(template: str) -> None:
    tracemalloc.start()
    t0 = time.perf_counter()
    try:
        with pytest.raises(RenderProblem) as info:
            render_text(template)
        elapsed = time.perf_counter() - t0
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert info.value.code == "jinja_limit", info.value.message
    assert "limit" in info.value.message and info.value.hint
    assert elapsed < 1.0, f"{elapsed:.2f} s"
    assert peak < 30 * 2**20, f"peak {peak / 2**20:.0f} MiB"


SLOW = {
    "nested_loops": "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
    "recursive_macro_loops": "{% macro m(n) %}{% for i in range(100000) %}{% endfor %}{{ m(n) }}{% endmacro %}{{ m(1) }}",
    "recursive_loop": ("{% for x in range(100000) recursive %}{% if loop.depth < 3 %}"
                       "{% set _ = loop(range(100000)) %}{% endif %}{% endfor %}"),
}


@pytest.mark.parametrize("template", SLOW.values(), ids=SLOW.keys())
def test_time_limit_stops_long_renders(template: str) -> None:
    t0 = time.perf_counter()
    with pytest.raises(RenderProblem) as info:
        render_text(template)
    elapsed = time.perf_counter() - t0
    assert info.value.code == "jinja_limit" and "took over" in info.value.message, info.value.message
    assert MAX_VALUE_SECONDS <= elapsed < MAX_VALUE_SECONDS + 1.0


@pytest.mark.parametrize("template", ["{{ 'x'.ljust(10**9) }}", "{{ '7'.zfill(10**9) }}",
                                      "{{ '\t'.expandtabs(10**9) }}", "{{ lipsum(10**9) }}"])
def test_padding_methods_and_lipsum_are_not_available(template: str) -> None:
    with pytest.raises(RenderProblem) as info:
        render_text(template)
    assert info.value.code in ("jinja_sandbox", "jinja_undefined")


@pytest.mark.parametrize("template,expected", [
    ("{{ 'x' * 1000 }}", "x" * 1000),
    ("{{ 2 ** 10 }}", "1024"),
    ("{{ 'a b'.split()|join(',') }}", "a,b"),
    ("{{ '{}-{:>3}'.format('t', 7) }}", "t-  7"),
    ("{{ '%03d' % 7 }}", "007"),
    ("{{ range(10)|map('string')|join(',') }}", "0,1,2,3,4,5,6,7,8,9"),
    ("{% filter upper %}abc{% endfilter %}", "ABC"),
    ("{% macro m() %}x{{ caller() }}{% endmacro %}{% call m() %}y{% endcall %}", "xy"),
    ("{% for x in [[1, [2]], [3]] recursive %}{% if x is iterable %}{{ loop(x) }}{% else %}{{ x }}{% endif %}"
     "{% endfor %}", "123"),
    ("{{ 'x'|center(5) }}", "  x  "),
    ("{{ [1, 2]|sum }}-{{ ['a', 'b']|sum(start='') if false else 'n' }}", "3-n"),
])
def test_ordinary_templates_render_as_before(template: str, expected: str) -> None:
    assert render_text(template) == expected


#: one ordinary use of every builtin filter: the guarded filters must render exactly as Jinja's own
FILTER_USES = {
    "abs": "{{ -3|abs }}", "attr": "{{ 'x'|attr('upper') is defined }}", "batch": "{{ range(5)|batch(2)|list }}",
    "capitalize": "{{ 'ab'|capitalize }}", "center": "{{ 'x'|center(5) }}", "count": "{{ [1, 2]|count }}",
    "d": "{{ none|d('x') }}", "default": "{{ none|default('x') }}", "dictsort": "{{ {'b': 1, 'a': 2}|dictsort }}",
    "e": "{{ '<'|e }}", "escape": "{{ '<'|escape }}", "filesizeformat": "{{ 123456789|filesizeformat }}",
    "first": "{{ [3, 4]|first }}", "float": "{{ '1.5'|float }}", "forceescape": "{{ '<'|forceescape }}",
    "format": "{{ '%s-%d'|format('a', 3) }}", "groupby": "{{ [{'a': 1}, {'a': 1}]|groupby('a')|list }}",
    "indent": "{{ 'a\nb'|indent(2) }}", "int": "{{ '42'|int }}", "items": "{{ {'a': 1}|items|list }}",
    "join": "{{ [1, 2]|join('-') }}", "last": "{{ [3, 4]|last }}", "length": "{{ 'abc'|length }}",
    "list": "{{ 'ab'|list }}", "lower": "{{ 'AB'|lower }}", "map": "{{ [1, 2]|map('string')|list }}",
    "max": "{{ [1, 5]|max }}", "min": "{{ [1, 5]|min }}", "pprint": "{{ {'a': [1]}|pprint }}",
    "random": "{{ [7]|random }}", "reject": "{{ [1, 2, 3]|reject('odd')|list }}",
    "rejectattr": "{{ [{'a': 0}, {'a': 1}]|rejectattr('a')|list }}", "replace": "{{ 'aXa'|replace('a', 'b') }}",
    "reverse": "{{ [1, 2]|reverse|list }}", "round": "{{ 2.567|round(1) }}", "safe": "{{ '<'|safe }}",
    "select": "{{ [1, 2, 3]|select('odd')|list }}", "selectattr": "{{ [{'a': 0}, {'a': 1}]|selectattr('a')|list }}",
    "slice": "{{ range(5)|slice(2)|list }}", "sort": "{{ [3, 1, 2]|sort }}", "string": "{{ 5|string }}",
    "striptags": "{{ '<b>x</b>'|striptags }}", "sum": "{{ [1, 2]|sum }}", "title": "{{ 'a b'|title }}",
    "tojson": "{{ {'a': [1, 2]}|tojson }}", "trim": "{{ ' a '|trim }}", "truncate": "{{ 'abcdefghij'|truncate(7, true, '') }}",
    "unique": "{{ [1, 1, 2]|unique|list }}", "upper": "{{ 'ab'|upper }}", "urlencode": "{{ 'a b'|urlencode }}",
    "urlize": "{{ 'see http://x.io'|urlize }}", "wordcount": "{{ 'a b c'|wordcount }}",
    "wordwrap": "{{ 'aaa bbb ccc'|wordwrap(4) }}", "xmlattr": "{{ {'k': 'v'}|xmlattr }}",
}


def test_every_builtin_filter_renders_as_in_plain_jinja() -> None:
    import jinja2
    from jinja2.filters import FILTERS
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    assert set(FILTER_USES) == set(FILTERS), "a Jinja filter without a use here"
    plain = ImmutableSandboxedEnvironment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    for name, template in FILTER_USES.items():
        assert render_text(template) == plain.from_string(template).render(), name
