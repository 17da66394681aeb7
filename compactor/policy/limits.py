"""Size and time limits for policy templates: a sandbox that refuses ``{{ 'x' * 10**9 }}`` at once.

Jinja's sandbox keeps templates away from Python internals but not from exhausting memory or time:
``'x' * 100000000`` builds 100 MB, nested loops over ``range(100000)`` run for hours. Every way a
template can grow a value or spend time passes through one of these checks, all against one
:class:`RenderBudget` (one per policy file, with a fresh value allowance per rendered value):

- operators: ``*``, ``**``, ``+`` and ``%`` are intercepted and refused *before* computing when the
  result would exceed the limits (sequence repetition, huge integers, printf widths);
- filters and ``str`` methods that amplify (``center``, ``indent``, ``replace``, ``join``, ``format``,
  ``batch``, ``slice``, ``sum``, ``tojson``, ``wordwrap``) have their arguments checked first; other
  ``str`` methods that only pad (``ljust``, ``zfill``, ``expandtabs``, ``translate``, ...) are refused;
- the template's syntax tree is rewritten so that every loop iteration, call result, concatenation and
  piece of output (also output captured by ``{% set %}`` blocks and macros) is counted and timed.

A limit that is hit raises :class:`LimitExceeded`; render.py reports it as ``jinja_limit``.
"""

from __future__ import annotations

import inspect
import re
import string
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

from jinja2 import nodes
from jinja2.filters import FILTERS
from jinja2.sandbox import ImmutableSandboxedEnvironment
from jinja2.visitor import NodeTransformer

#: characters one rendered value (and any intermediate value or sequence) may reach
MAX_VALUE_CHARS = 1_000_000
#: characters all rendered values of one file may reach together (the input file limit is 5 MiB)
MAX_FILE_CHARS = 5_000_000
#: seconds one value may take to render, and all values of one file together
MAX_VALUE_SECONDS = 2.0
MAX_FILE_SECONDS = 5.0
#: bits an integer may reach (``2 ** 10 ** 9`` is refused before Python starts computing it)
MAX_INT_BITS = 1_000_000

_SIZED = (str, bytes, list, tuple, dict, set, frozenset)

#: ``str`` methods a template may call; padding and translation methods are not needed by policies
#: and could build huge strings from tiny arguments, so they are refused like Python internals
STR_METHODS = frozenset({
    "capitalize", "casefold", "count", "decode", "encode", "endswith", "find", "format", "index", "isalnum", "isalpha",
    "isdecimal", "isdigit", "islower", "isnumeric", "isspace", "istitle", "isupper", "join", "lower",
    "lstrip", "partition", "removeprefix", "removesuffix", "replace", "rfind", "rindex", "rpartition",
    "rsplit", "rstrip", "split", "splitlines", "startswith", "strip", "swapcase", "title", "upper",
})


_T = TypeVar("_T")


class LimitExceeded(Exception):
    """A template went over a size or time limit."""


@dataclass
class RenderBudget:
    """Limits shared by the values of one file; :meth:`start_value` opens each value's allowance."""

    value_chars: int = MAX_VALUE_CHARS
    file_chars: int = MAX_FILE_CHARS
    value_seconds: float = MAX_VALUE_SECONDS
    file_seconds: float = MAX_FILE_SECONDS
    started: float = field(default_factory=time.monotonic)
    file_used: int = 0
    _value_deadline: float = 0.0
    _emitted: int = 0

    def start_value(self) -> None:
        now = time.monotonic()
        if now - self.started > self.file_seconds:
            raise LimitExceeded(f"the file's templates took over {self.file_seconds:g} s to render "
                                "(this value was not rendered)")
        if self.file_used > self.file_chars:
            raise LimitExceeded(f"the file's rendered values exceed {self.file_chars:,} characters "
                                "(this value was not rendered)")
        self._value_deadline = min(now + self.value_seconds, self.started + self.file_seconds)
        self._emitted = 0

    def tick(self) -> None:
        if time.monotonic() > self._value_deadline:
            if time.monotonic() - self.started > self.file_seconds:
                raise LimitExceeded(f"the file's templates took over {self.file_seconds:g} s to render")
            raise LimitExceeded(f"rendering took over {self.value_seconds:g} s")

    def size(self, n: int, what: str = "a value") -> None:
        if n > self.value_chars:
            raise LimitExceeded(f"{what} would be {n:,} characters long (the limit is {self.value_chars:,})")

    def count(self, n: int, what: str) -> None:
        if n > self.value_chars:
            raise LimitExceeded(f"{what} is {n:,} (the limit is {self.value_chars:,})")

    def value(self, v: _T) -> _T:
        """Check an intermediate value (call, filter or operator result) and pass it through."""
        self.tick()
        self.size(estimate(v, self.value_chars))
        return v

    def emit(self, v: _T) -> _T:
        """Count a piece of output, including output captured by set blocks and macros."""
        self.tick()
        self._emitted += estimate(v, self.value_chars)
        self.size(self._emitted, "the rendered value")
        return v

    def finish_value(self, text: str) -> str:
        self.size(len(text), "the rendered value")
        self.file_used += len(text)
        if self.file_used > self.file_chars:
            raise LimitExceeded(f"the file's rendered values exceed {self.file_chars:,} characters")
        return text

    def iterate(self, iterable: Iterable[Any]) -> Iterator[Any]:
        for item in iterable:
            self.tick()
            yield item


def estimate(value: Any, cap: int) -> int:
    """A lower bound of ``len(str(value))``, computed in at most ~cap steps (stops once above cap)."""
    if isinstance(value, (str, bytes)):
        return len(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return value.bit_length() * 3 // 10 + 1
    if not isinstance(value, (list, tuple, dict, set, frozenset)):
        return 1
    total = len(value)
    stack = [iter(value.items() if isinstance(value, dict) else value)]
    while stack and total <= cap:
        item = next(stack[-1], _END)
        if item is _END:
            stack.pop()
            continue
        if isinstance(item, (str, bytes)):
            total += len(item)
        elif isinstance(item, (list, tuple, dict, set, frozenset)):
            total += len(item) + 1
            stack.append(iter(item.items() if isinstance(item, dict) else item))
        else:
            total += 1
    return total


_END = object()
_PRINTF_NUMBERS = re.compile(r"%[-#0 +]*(\*|\d+)?(?:\.(\*|\d+))?")
_DIGITS = re.compile(r"\d+")


def check_printf(budget: RenderBudget, fmt: str) -> None:
    for m in _PRINTF_NUMBERS.finditer(fmt):
        for n in m.groups():
            if n == "*":
                raise LimitExceeded("'*' widths in %-formats are not allowed")
            if n:
                budget.size(int(n), "a %-format field")


def check_format_spec(budget: RenderBudget, fmt: str) -> None:
    for _, _, spec, _ in string.Formatter().parse(fmt):
        if not spec:
            continue
        if "{" in spec:
            raise LimitExceeded("nested fields in a format spec ('{:{w}}') are not allowed")
        for n in _DIGITS.findall(spec):
            budget.size(int(n), "a format field")


def _int_bits(v: Any) -> int | None:
    return abs(v).bit_length() if isinstance(v, int) and not isinstance(v, bool) else None


def check_binop(budget: RenderBudget, op: str, left: Any, right: Any) -> None:
    lb, rb = _int_bits(left), _int_bits(right)
    if op == "*":
        for seq, n in ((left, right), (right, left)):
            if isinstance(seq, _SIZED) and _int_bits(n) is not None:
                budget.size(len(seq) * max(0, n), "a repeated sequence")
        if lb is not None and rb is not None and lb + rb > MAX_INT_BITS:
            raise LimitExceeded(f"an integer product would exceed {MAX_INT_BITS:,} bits")
    elif op == "**":
        if lb is not None and rb is not None and right > 0 and lb > 1 and (lb - 1) * right > MAX_INT_BITS:
            raise LimitExceeded(f"a power would exceed {MAX_INT_BITS:,} bits")
    elif op == "+":
        if isinstance(left, _SIZED) and isinstance(right, _SIZED):
            budget.size(len(left) + len(right), "a concatenation")
    elif op == "%" and isinstance(left, str):
        check_printf(budget, left)
        budget.value(right)


# --- filters: argument checks before the filter runs, result check after ------------------------

def _pre_center(b: RenderBudget, a: dict[str, Any]) -> None:
    b.size(max(len(str(a["value"])), a.get("width", 80)), "a centred string")


def _pre_indent(b: RenderBudget, a: dict[str, Any]) -> None:
    width = a.get("width", 4)
    per_line = width if isinstance(width, int) else len(str(width))
    b.size(len(str(a["s"])) + (str(a["s"]).count("\n") + 1) * per_line, "an indented string")


def _pre_replace(b: RenderBudget, a: dict[str, Any]) -> None:
    s, old, new = str(a["s"]), str(a["old"]), str(a["new"])
    hits = s.count(old) if old else len(s) + 1
    if a.get("count") is not None:
        hits = min(hits, max(0, a["count"]))
    b.size(len(s) + hits * max(0, len(new) - len(old)), "a replaced string")


def _pre_join(b: RenderBudget, a: dict[str, Any]) -> None:
    items = list(b.iterate(a["value"]))
    a["value"] = items
    total = sum(estimate(x, b.value_chars) for x in items) + max(0, len(items) - 1) * len(str(a.get("d", "")))
    b.size(total, "a joined string")


def _pre_sum(b: RenderBudget, a: dict[str, Any]) -> None:
    items = list(b.iterate(a["iterable"]))
    a["iterable"] = items
    if isinstance(a.get("start", 0), _SIZED) or any(isinstance(x, _SIZED) for x in items):
        b.size(sum(len(x) for x in items if isinstance(x, _SIZED)), "a sum of sequences")


def _pre_format(b: RenderBudget, a: dict[str, Any]) -> None:
    check_printf(b, str(a["value"]))
    for v in list(a.get("args", ())) + list((a.get("kwargs") or {}).values()):
        b.value(v)


def _pre_count(name: str) -> Callable[[RenderBudget, dict[str, Any]], None]:
    def pre(b: RenderBudget, a: dict[str, Any]) -> None:
        n = a.get(name)
        if isinstance(n, int):
            b.count(n, f"the {name} argument")
    return pre


def _pre_wordwrap(b: RenderBudget, a: dict[str, Any]) -> None:
    wrap = a.get("wrapstring")
    b.size(len(str(a["s"])) * (1 + len(wrap if isinstance(wrap, str) else "\n")), "a wrapped string")


_PRECHECKS: dict[str, Callable[[RenderBudget, dict[str, Any]], None]] = {
    "center": _pre_center, "indent": _pre_indent, "replace": _pre_replace, "join": _pre_join,
    "sum": _pre_sum, "format": _pre_format, "batch": _pre_count("linecount"), "slice": _pre_count("slices"),
    "tojson": _pre_count("indent"), "wordwrap": _pre_wordwrap,
}


_SIGNATURES: dict[Callable[..., Any], inspect.Signature] = {}


def _guard_filter(budget: RenderBudget, name: str, f: Callable[..., Any]) -> Callable[..., Any]:
    sig = _SIGNATURES.get(f)
    if sig is None:
        sig = _SIGNATURES[f] = inspect.signature(f)
    pre = _PRECHECKS.get(name)

    # jinja's async_variant filters take the context first only to detect async mode; the function
    # they wrap (whose signature inspect reports) does not
    passes = bool(getattr(f, "jinja_pass_arg", None))
    inner = getattr(f, "__wrapped__", None)
    injected = passes and inner is not None and getattr(inner, "jinja_pass_arg", None) is None

    def guarded(*args: Any, **kwargs: Any) -> Any:
        budget.tick()
        head, args = (args[:1], args[1:]) if injected else ((), args)
        bound = sig.bind(*args, **kwargs)
        bound.apply_defaults()
        first = list(bound.arguments)[1 if passes and not injected else 0]
        budget.value(bound.arguments[first])
        if pre is not None:
            arguments = dict(bound.arguments)
            if "kwargs" in arguments and isinstance(arguments["kwargs"], dict):
                arguments["kwargs"] = dict(arguments["kwargs"])
            pre(budget, arguments)
            for k in ("value", "iterable"):
                if k in arguments:
                    bound.arguments[k] = arguments[k]
        return budget.value(f(*head, *bound.args, **bound.kwargs))

    guarded.__dict__.update(getattr(f, "__dict__", {}))  # keeps jinja_pass_arg
    guarded.__name__ = getattr(f, "__name__", name)
    return guarded


# --- the syntax-tree rewrite ---------------------------------------------------------------------

_ITER, _VALUE, _EMIT = "__compactor_iter", "__compactor_value", "__compactor_emit"


def _wrap(helper: str, node: nodes.Expr) -> nodes.Call:
    return nodes.Call(nodes.Name(helper, "load", lineno=node.lineno), [node], [], None, None, lineno=node.lineno)


class _Instrument(NodeTransformer):
    """Route loops, call results, concatenations and output through the budget."""

    def __init__(self) -> None:
        self.recursive = 0

    def visit_For(self, node: nodes.For) -> nodes.Node:
        self.recursive += node.recursive
        self.generic_visit(node)
        self.recursive -= node.recursive
        # jinja2 annotates For.iter as any Node; its parser only puts an expression there
        node.iter = _wrap(_ITER, node.iter)  # type: ignore[arg-type]
        return node

    def visit_Output(self, node: nodes.Output) -> nodes.Node:
        self.generic_visit(node)
        node.nodes = [_wrap(_EMIT, nodes.Const(n.data, lineno=n.lineno) if isinstance(n, nodes.TemplateData)
                            else n) for n in node.nodes]
        return node

    def visit_Concat(self, node: nodes.Concat) -> nodes.Node:
        self.generic_visit(node)
        node.nodes = [_wrap(_VALUE, n) for n in node.nodes]
        return _wrap(_VALUE, node)

    def visit_Call(self, node: nodes.Call) -> nodes.Node:
        self.generic_visit(node)
        if self.recursive and isinstance(node.node, nodes.Name) and node.node.name == "loop" and node.args:
            node.args[0] = _wrap(_ITER, node.args[0])  # a recursive loop's next level iterates this
        return _wrap(_VALUE, node)

    def visit_CallBlock(self, node: nodes.CallBlock) -> nodes.Node:
        call = node.call
        self.generic_visit(node)
        if isinstance(node.call, nodes.Call) and node.call is not call:  # keep `{% call %}`'s own Call
            # args[0] of visit_Call's wrapper is the original Call; jinja2 types Call.args as Expr
            node.call = node.call.args[0]  # type: ignore[assignment]
        return node


class LimitedSandbox(ImmutableSandboxedEnvironment):
    """The immutable sandbox, plus the budget checks described in the module docstring."""

    intercepted_binops = frozenset({"*", "**", "+", "%"})

    def __init__(self, budget: RenderBudget, **options: Any) -> None:
        super().__init__(**options)
        self.budget = budget
        self.globals.pop("lipsum", None)  # lipsum(10**9) builds gigabytes; no use in a policy
        self.globals.update({_ITER: budget.iterate, _VALUE: budget.value, _EMIT: budget.emit})
        self.filters = {name: _guard_filter(budget, name, f) for name, f in FILTERS.items()}

    def add_filter(self, name: str, f: Callable[..., Any]) -> None:
        self.filters[name] = _guard_filter(self.budget, name, f)

    def _parse(self, source: str, name: str | None, filename: str | None) -> nodes.Template:
        # NodeTransformer.visit returns Any; _Instrument's visitors give a Template back as a Template
        template: nodes.Template = _Instrument().visit(super()._parse(source, name, filename))
        return template

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        self.budget.tick()
        check_binop(self.budget, operator, left, right)
        return self.budget.value(super().call_binop(context, operator, left, right))

    def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N805 - jinja's signature
        __self.budget.tick()
        owner = getattr(__obj, "__self__", None)
        if isinstance(owner, str) and getattr(__obj, "__name__", "") in ("replace", "join"):
            if __obj.__name__ == "replace" and len(args) >= 2:
                _pre_replace(__self.budget, {"s": owner, "old": args[0], "new": args[1],
                                             "count": args[2] if len(args) > 2 else None})
            elif __obj.__name__ == "join" and args:
                a = {"value": args[0], "d": owner}
                _pre_join(__self.budget, a)
                args = (a["value"], *args[1:])
        return super().call(__context, __obj, *args, **kwargs)

    def is_safe_attribute(self, obj: Any, attr: str, value: Any) -> bool:
        if isinstance(obj, (str, bytes)) and callable(value) and attr not in STR_METHODS:
            return False
        return super().is_safe_attribute(obj, attr, value)

    def wrap_str_format(self, value: Any) -> Callable[..., str] | None:
        wrapper = super().wrap_str_format(value)
        if wrapper is None:
            return None
        template = value.__self__

        def checked(*args: Any, **kwargs: Any) -> str:
            check_format_spec(self.budget, template)
            for v in list(args) + list(kwargs.values()):
                self.budget.value(v)
            return self.budget.value(wrapper(*args, **kwargs))

        return checked
