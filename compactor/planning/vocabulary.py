"""What the formats add to a plan's words: their action types, skip reasons, blocker kinds and remedies.

The shared rewrites (compact, z_order, sort) and the shared skip reasons are planning's own. A format's
own live in its folder, in the module its registry entry names (compactor/models/formats.py,
``FormatSpec.actions``), which calls ``register`` when it is imported. The lookups here import that module
the first time one of its words is met (a plan file naming an action type, the plan schema listing them
all), so planning names no format; the module is pure planning data like this package (a test checks)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from importlib import import_module

from compactor.models.formats import FORMATS, format_spec
from compactor.planning.actions import SHARED_ACTIONS, Action
from compactor.planning.blocker_kinds import BlockerKind
from compactor.planning.skips import Remedy, SkipKind, SkipReason

_actions: dict[str, type[Action]] = {c.type: c for c in SHARED_ACTIONS}
_skips: dict[str, SkipKind] = {}
_blockers: dict[str, BlockerKind] = {}
_remedies: dict[str, Remedy] = {}
#: the action types each format runs
_runs: dict[str, set[str]] = {}
#: each format's own action types and skip reasons, in the order it registered them (the lists below give
#: them in registry order, whichever format a process happened to meet first)
_own_actions: dict[str, list[str]] = {}
_own_skips: dict[str, list[str]] = {}
_loaded: set[str] = set()
_SHARED_REASONS = frozenset(r.value for r in SkipReason)


def register(fmt: str, *, actions: Iterable[type[Action]] = (), shared: Iterable[type[Action]] = (),
             skips: Iterable[SkipKind] = (), blockers: Iterable[BlockerKind] = (),
             remedies: Mapping[str, Remedy] | None = None) -> None:
    """Add format ``fmt``'s own words (its actions module calls this once, when imported): its action types,
    the ``shared`` ones it runs too, its skip reasons, blocker kinds and remedies."""
    for cls in actions:
        if _actions.get(cls.type, cls) is not cls:
            raise ValueError(f"action type {cls.type!r} is registered twice")
        _actions[cls.type] = cls
        _own_actions.setdefault(fmt, []).append(cls.type)
    _runs.setdefault(fmt, set()).update(c.type for c in (*shared, *actions))
    for s in skips:
        if s.reason in _SHARED_REASONS or _skips.get(s.reason, s) != s:
            raise ValueError(f"skip reason {s.reason!r} is registered twice")
        _skips[s.reason] = s
        _own_skips.setdefault(fmt, []).append(s.reason)
    for b in blockers:
        _blockers[b.kind] = b
    _remedies.update(remedies or {})


def load_format(name: str) -> None:
    """Import the module of format ``name``'s own words, once (an unknown format has none)."""
    spec = format_spec(name)
    if spec is None or name in _loaded:
        return
    import_module(spec.actions)
    _loaded.add(name)  # after the import: another thread looking a word up meanwhile imports it too (a no-op)


def load_all() -> None:
    for spec in FORMATS:
        load_format(spec.name)


def action_class(type_: str) -> type[Action] | None:
    """The class of action type ``type_`` (importing the formats' words when it is not a shared one);
    None: no format has it."""
    if type_ not in _actions:
        load_all()
    return _actions.get(type_)


def action_types(fmt: str) -> frozenset[str]:
    """The action types apply runs on a table of format ``fmt``."""
    load_format(fmt)
    return frozenset(_runs.get(fmt, ()))


def action_classes() -> list[type[Action]]:
    """Every action type: the shared ones, then each format's in registry order."""
    load_all()
    own = [t for spec in FORMATS for t in _own_actions.get(spec.name, ())]
    rest = [t for t in _actions if t not in own and t not in {c.type for c in SHARED_ACTIONS}]
    return [*SHARED_ACTIONS, *(_actions[t] for t in (*own, *rest))]


def rewrite_types() -> frozenset[str]:
    """The action types that rewrite data files (their rows must be preserved exactly)."""
    return frozenset(c.type for c in action_classes() if c.rewrites)


def skip_kind(reason: str) -> SkipKind | None:
    """The format's SkipKind of ``reason``; None for a shared reason (or an unknown one)."""
    if reason not in _skips and reason not in _SHARED_REASONS:
        load_all()
    return _skips.get(reason)


def skip_reasons() -> list[str]:
    """Every skip reason: the shared ones, then each format's (the plan schema's enum)."""
    load_all()
    own = [r for spec in FORMATS for r in _own_skips.get(spec.name, ())]
    return [*(r.value for r in SkipReason), *own, *(r for r in _skips if r not in own)]


def skip_reason(code: str) -> str:
    """``code`` as the reason a Skip carries (a SkipReason when it is a shared one)."""
    return SkipReason(code) if code in _SHARED_REASONS else code


def blocker_kind(kind: str) -> BlockerKind:
    """How plan and apply speak of blockers of ``kind`` (generic words for a kind nobody registered)."""
    if kind not in _blockers:
        load_all()
    return _blockers.get(kind) or BlockerKind(kind, kind.replace("_", " "), "action")


def blocker_kinds() -> list[BlockerKind]:
    load_all()
    return list(_blockers.values())


def remedy(need: object) -> Remedy | None:
    """The remedy a skip's ``needs`` detail names (planning/explain.py); None when no format registered it."""
    if not isinstance(need, str):
        return None
    if need not in _remedies:
        load_all()
    return _remedies.get(need)
