"""Render policy and profile files with a sandboxed Jinja environment (like dbt, before YAML parsing).

Rendering happens on the raw text so that line numbers of the rendered YAML stay those of the file as
long as expressions do not emit newlines. The sandbox refuses access to Python internals
(``{{ ''.__class__ }}``); undefined names are errors (StrictUndefined).
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from compactor.policy.yamlpos import Located, join_path

if TYPE_CHECKING:  # Jinja and the sandbox's limits are imported when a value holds a template: most
    # files hold none, and every command reads compactor.yml and profiles.yml (about 40 ms of imports)
    from compactor.policy.limits import LimitedSandbox, RenderBudget

_MISSING = object()


@dataclass
class RenderProblem(Exception):
    """Why a template could not be rendered: a code and a message at a line of the file, and a hint."""

    code: str
    message: str
    line: int = 1
    hint: str | None = None


class _VarsMissing(Exception):
    pass


def _limit_hint() -> str:
    from compactor.policy.limits import MAX_FILE_CHARS, MAX_FILE_SECONDS, MAX_VALUE_CHARS, MAX_VALUE_SECONDS

    return (f"a value may render to {MAX_VALUE_CHARS:,} characters in {MAX_VALUE_SECONDS:g} s, a file's values "
            f"to {MAX_FILE_CHARS:,} characters in {MAX_FILE_SECONDS:g} s; policy values are short settings")


def _make_env(vars: Mapping[str, Any], now: dt.datetime, env: Mapping[str, str],
              used_env: set[str] | None, budget: RenderBudget) -> LimitedSandbox:
    import jinja2

    from compactor.policy.limits import LimitedSandbox

    jenv = LimitedSandbox(budget, undefined=jinja2.StrictUndefined, autoescape=False, keep_trailing_newline=True)

    def lookup(source: Mapping[str, Any], name: str, default: Any, problem: RenderProblem) -> Any:
        if name in source:
            return source[name]
        if default is _MISSING:
            raise problem
        return default

    def var(name: str, default: Any = _MISSING) -> Any:
        return lookup(vars, name, default, RenderProblem(
            "undefined_var", f"var '{name}' is not defined",
            hint="define it under `vars:` in compactor.yml, pass --vars, or give a default"))

    def env_var(name: str, default: Any = _MISSING) -> Any:
        if used_env is not None:
            used_env.add(name)
        return lookup(env, name, default, RenderProblem(
            "undefined_env_var", f"environment variable '{name}' is not set",
            hint="export it or give a default: env_var('X', 'default')"))

    def today() -> dt.date:
        return now.date()

    def days_ago(n: int) -> dt.date:
        return now.date() - dt.timedelta(days=int(n))

    def ds_add(ds: Any, n: int) -> str:
        d = ds if isinstance(ds, dt.date) else dt.date.fromisoformat(str(ds))
        return (d + dt.timedelta(days=int(n))).isoformat()

    def strftime(value: str | dt.date, fmt: str = "%Y-%m-%d") -> str:
        if isinstance(value, str):
            value = dt.date.fromisoformat(value)
        return value.strftime(fmt)

    helpers: dict[str, Callable[..., Any]] = {
        "var": var, "env_var": env_var, "today": today, "now": lambda: now, "days_ago": days_ago,
        "ds_add": ds_add,
    }
    jenv.globals.update(helpers)
    jenv.add_filter("strftime", strftime)
    jenv.add_filter("date_format", strftime)
    return jenv


def render_text(
    text: str,
    *,
    vars: Mapping[str, Any] | None = None,
    now: dt.datetime | None = None,
    env: Mapping[str, str] | None = None,
    used_env: set[str] | None = None,
    budget: RenderBudget | None = None,
) -> str:
    """Render ``text``; raises RenderProblem with the template line on any error. ``budget`` holds the
    size and time limits (shared by the values of one file; a fresh one per call when not given)."""
    if "{{" not in text and "{%" not in text and "{#" not in text:
        return text
    import jinja2
    from jinja2.exceptions import SecurityError

    from compactor.policy.limits import LimitExceeded, RenderBudget

    budget = budget or RenderBudget()
    try:
        budget.start_value()
        jenv = _make_env(vars or {}, now or dt.datetime.now(dt.UTC), os.environ if env is None else env,
                         used_env, budget)
        template = jenv.from_string(text)
        return budget.finish_value(template.render())
    except RenderProblem as p:
        p.line = _template_line() or p.line
        raise
    except LimitExceeded as e:
        raise RenderProblem("jinja_limit", f"template limit exceeded: {e}", _template_line() or 1,
                            _limit_hint()) from None
    except MemoryError:
        raise RenderProblem("jinja_limit", "template limit exceeded: out of memory", _template_line() or 1,
                            _limit_hint()) from None
    except jinja2.TemplateSyntaxError as e:
        raise RenderProblem("jinja_syntax", e.message or str(e), e.lineno or 1) from None
    except SecurityError as e:
        raise RenderProblem("jinja_sandbox", f"refused by the template sandbox: {e}", _template_line() or 1,
                            "templates may only use vars, env_var and the date helpers") from None
    except jinja2.UndefinedError as e:
        raise RenderProblem("jinja_undefined", str(e.message), _template_line() or 1,
                            "use var('name') / env_var('NAME'); plain names are not defined") from None
    except RecursionError:
        raise RenderProblem("jinja_error", "template recursion too deep", 1) from None
    except Exception as e:  # noqa: BLE001 - any failure inside a template is the template's
        raise RenderProblem("jinja_error", f"{type(e).__name__}: {e}", _template_line() or 1) from None


def _template_line() -> int | None:
    """Line of the template frame in the current exception's traceback."""
    import sys

    tb = sys.exc_info()[2]
    line = None
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == "<template>":
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


def render_tree(doc: Located, *, vars: Mapping[str, Any] | None = None, now: dt.datetime | None = None,
                env: Mapping[str, str] | None = None) -> tuple[Located, list[tuple[str, RenderProblem]]]:
    """Render every string value of a loaded YAML document (like dbt: comments are never rendered).

    A value that is one whole expression (``"{{ var('n') }}"``) keeps the native type of its result
    (YAML-parsed: 5 -> int, true -> bool). Returns the rendered document (same positions) and the
    problems, each with the JSON path of the value it came from.
    """
    import yaml

    problems: list[tuple[str, RenderProblem]] = []
    budgets: list[RenderBudget] = []  # one per file (made at its first template): its limits cover all
    # of the file's values together

    def walk(value: Any, path: str) -> Any:
        if isinstance(value, dict):
            return {k: walk(v, join_path(path, k)) for k, v in value.items()}
        if isinstance(value, list):
            return [walk(v, join_path(path, i)) for i, v in enumerate(value)]
        if isinstance(value, str) and ("{{" in value or "{%" in value):
            if not budgets:
                from compactor.policy.limits import RenderBudget

                budgets.append(RenderBudget())
            try:
                out = render_text(value, vars=vars, now=now, env=env, budget=budgets[0])
            except RenderProblem as p:
                problems.append((path, p))
                return value
            stripped = value.strip()
            # a value that is one expression may render a number, a boolean or null; those are short,
            # and PyYAML's scanner is slow on long text (a 900k-character value took seconds)
            if (out.strip() and len(out) <= 100 and stripped.startswith("{{") and stripped.endswith("}}")
                    and stripped.count("{{") == 1):
                try:
                    native = yaml.load(out, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
                except yaml.YAMLError:
                    return out
                if isinstance(native, (int, float, bool)) or native is None:
                    return native
            return out
        return value

    return Located(walk(doc.value, ""), doc.positions), problems

