"""Jinja is imported only when a value holds a template (compactor/policy/render.py): a project without
templates (most) spends no time on it, and a template still renders, under the same sandbox and limits."""

from __future__ import annotations

import subprocess
import sys

CODE = """
import sys
from compactor.policy.render import RenderProblem, render_text
from compactor.policy.yamlpos import Located
from compactor.policy.render import render_tree
assert render_text("plain: 1") == "plain: 1"
doc, problems = render_tree(Located({"a": "x", "b": ["y", 2]}, {}))
assert doc.value == {"a": "x", "b": ["y", 2]} and not problems
print("jinja2" in sys.modules, "compactor.policy.limits" in sys.modules)
assert render_text("{{ 1 + 1 }}") == "2"
doc, problems = render_tree(Located({"n": "{{ var('n') }}"}, {}), vars={"n": 5})
assert doc.value == {"n": 5} and not problems
try:
    render_text("{{ 'x' * 10 ** 9 }}")
except RenderProblem as p:
    assert p.code == "jinja_limit", p
else:
    raise AssertionError("the size limit did not apply")
print("jinja2" in sys.modules)
"""


def test_jinja_is_imported_at_the_first_template_only() -> None:
    r = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["False", "False", "True"]
