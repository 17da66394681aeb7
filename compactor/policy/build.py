"""Turn schema-valid table dicts (defaults merged) into TablePolicy objects, with semantic checks."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from compactor.models.formats import DEFAULT_FORMAT, FORMATS, format_spec
from compactor.policy import model as m
from compactor.policy.diagnostics import Diagnostic
from compactor.policy.predicate import PredicateError, parse_where
from compactor.policy.yamlpos import Located
from compactor.units import UnitError, format_setting_size, parse_duration, parse_size


def deep_merge(*layers: Mapping[str, Any] | None) -> dict[str, Any]:
    """Later layers win; mappings merge recursively, lists and scalars replace."""
    out: dict[str, Any] = {}
    for layer in layers:
        for k, v in (layer or {}).items():
            if isinstance(v, Mapping) and isinstance(out.get(k), Mapping):
                out[k] = deep_merge(out[k], v)
            else:
                out[k] = copy.deepcopy(v)
    return out


class _Ctx:
    def __init__(self, doc: Located, file: str, base: str,
                 layers: list[tuple[Located, str, str]] | None = None) -> None:
        self.doc, self.file, self.base = doc, file, base
        #: (doc, file, base) in priority order: the table, file defaults, project defaults
        self.layers = layers or [(doc, file, base)]
        self.diags: list[Diagnostic] = []
        self.locations: dict[str, m.SourceRef] = {}

    def _where(self, key: str) -> tuple[str, str, int, int]:
        if key:
            for doc, file, base in self.layers:
                path = f"{base}.{key}"
                if path in doc.positions:
                    return file, path, *doc.positions[path]
        path = f"{self.base}.{key}" if key else self.base
        return self.file, path, *self.doc.pos(path)

    def ref(self, key: str) -> m.SourceRef:
        file, path, line, col = self._where(key)
        return m.SourceRef(file, line, col, layer_of(path, own_file=file == self.file))

    def error(self, key: str, code: str, message: str, hint: str | None = None, severity: str = "error") -> None:
        file, path, line, col = self._where(key)
        self.diags.append(Diagnostic(file, line, col, code, message, path, hint, severity))

    def size(self, d: Mapping[str, Any], key: str, prefix: str, default: int | None) -> int | None:
        if key not in d:
            return default
        try:
            return parse_size(d[key])
        except UnitError as e:
            self.error(f"{prefix}.{key}", "invalid_size", str(e), "use e.g. 512MB, 1GiB")
            return default

    def duration(self, d: Mapping[str, Any], key: str, prefix: str, default: int | None) -> int | None:
        if key not in d:
            return default
        try:
            return parse_duration(d[key])
        except UnitError as e:
            self.error(f"{prefix}.{key}", "invalid_duration", str(e), "use e.g. 30m, 168h, 7d")
            return default


def layer_of(path: str, *, own_file: bool) -> str:
    """The merge layer a value's position belongs to (``tables[3].x`` -> table, ``catalogs.c.namespaces.n``
    -> namespace c.n, ``catalogs.c.defaults`` -> catalog c, ``defaults`` -> file or project defaults; a
    dbt node's ``models[2].config.meta``, ``config(meta=...)`` -> dbt model, ``models.shop.+meta`` ->
    dbt_project.yml, ``manifest.x`` -> dbt manifest)."""
    parts = path.split(".")
    if parts[0].startswith("tables["):
        return "table"
    kind = parts[0].split("[")[0]
    if parts[0] == "config":
        return "dbt config()"
    if parts[0] == "manifest":
        return "dbt manifest"
    if kind in ("models", "seeds", "snapshots"):
        return f"dbt {kind[:-1]}" if "[" in parts[0] else "dbt_project.yml"
    if parts[0] == "catalogs" and len(parts) > 3 and parts[2] == "namespaces":
        return f"namespace {parts[1]}.{parts[3]}"
    if parts[0] == "catalogs" and len(parts) > 2:
        return f"catalog {parts[1]}"
    if parts[0] == "defaults":
        return "file defaults" if own_file else "project defaults"
    return ""


def _record_locations(ctx: _Ctx, value: Any, key: str = "", declared: dict[str, object] | None = None) -> None:
    if isinstance(value, Mapping):
        for k, v in value.items():
            sub = f"{key}.{k}" if key else k
            ctx.locations[sub] = ctx.ref(sub)
            if declared is not None and not isinstance(v, Mapping):
                declared[sub] = v
            _record_locations(ctx, v, sub, declared)


def writer_settings_formats() -> tuple[str, ...]:
    """The formats whose policies ask something of the table's writer (their ``sink:`` block: the
    settings `compactor compile` prints)."""
    return tuple(f.name for f in FORMATS if f.sink_settings)


def default_table_policy(name: str, fmt: str, path: str) -> m.TablePolicy:
    """The policy a table gets when none is written (`compactor inspect` of a bare path): every default,
    its format's blocks included (a sink's ``sink:`` block, as ``build_table`` gives a policy without one)."""
    spec = format_spec(fmt)
    return m.TablePolicy(name=name, format=fmt, path=path,
                         sink=m.Sink() if spec is not None and spec.sink_settings else None)


def build_table(raw: Mapping[str, Any], *, doc: Located, file: str, base: str,
                layers: list[tuple[Located, str, str]] | None = None) -> tuple[m.TablePolicy | None, list[Diagnostic]]:
    """raw: the merged table mapping (already schema-valid)."""
    ctx = _Ctx(doc, file, base, layers)
    declared: dict[str, object] = {}
    _record_locations(ctx, raw, declared=declared)
    fmt = raw.get("format", DEFAULT_FORMAT)
    spec = format_spec(fmt) or FORMATS[0]  # the schema admits registered formats only
    sinks = ", ".join(f.name for f in FORMATS if f.sink_settings)
    comp = _compaction(ctx, raw.get("compaction") or {}, fmt)
    retention = _retention(ctx, raw["retention"], fmt) if "retention" in raw and spec.retention else None
    sink = None
    if "sink" in raw:
        if not spec.sink_settings:
            ctx.error("sink", "sink_on_delta", f"the `sink` block applies only to format: {sinks}",
                      f"set format: {sinks} or remove the sink block")
        sink = _sink(ctx, raw["sink"])
    elif spec.sink_settings:
        sink = m.Sink()
    if spec.sink_settings and sink is not None and sink.downstream_streaming_readers == "unknown":
        ctx.error("sink", "sink_readers_unacknowledged",
                  "downstream streaming readers are not acknowledged; compaction of this sink will be refused",
                  "set sink.downstream_streaming_readers: none (or reprocess_ok)", severity="warning")
    if comp.strategy not in spec.strategies:
        ctx.error("compaction.strategy", "unsupported_strategy",
                  f"strategy {comp.strategy} is not supported for {fmt} tables",
                  f"use {' or '.join(sorted(spec.strategies))}")
    if not spec.retention and "retention" in raw:
        ctx.error("retention", "retention_on_sink",
                  f"`retention` applies to {', '.join(f.name for f in FORMATS if f.retention)} tables"
                  + ("; use sink.retention" if spec.sink_settings else ""), None)
    if "path" in raw and "discover" in raw:
        ctx.error("discover", "ambiguous_location", "give either `path` or `discover`, not both")
    discover = None
    if "discover" in raw:
        d = raw["discover"]
        discover = m.Discover(root=d.get("root"), include=tuple(d.get("include") or ("**",)),
                              exclude=tuple(d.get("exclude") or ()), catalog=d.get("catalog"),
                              namespace=d.get("namespace"))
        if (d.get("root") is None) == (d.get("catalog") is None):
            ctx.error("discover", "discover_source", "a discover names either a `root` folder or a `catalog`")
        elif d.get("catalog") is not None and not d.get("namespace"):
            ctx.error("discover", "discover_namespace", "a discover over a catalog names its `namespace`")
    catalog = None
    if "catalog" in raw:
        c = raw["catalog"]
        catalog = m.CatalogRef(c["name"], c["namespace"], c.get("table") or raw["name"])
        if "path" in raw or "discover" in raw:
            ctx.error("catalog", "ambiguous_location", "give one of `path`, `discover` or `catalog`")
    by_catalog = catalog is not None or (discover is not None and discover.catalog is not None)
    if spec.catalog_only and not by_catalog and not (spec.path_planning and "path" in raw):
        ctx.error("path" if "path" in raw else "", "catalog_table_required",
                  f"a {fmt} table is named by a catalog of the target, not by a path: its format reads and "
                  "commits it through that catalog",
                  "give `catalog: {name: <catalog>, namespace: <namespace>, table: <table>}` (the catalog declared "
                  "under the target's `catalogs:` in profiles.yml) or a `discover` over that catalog")
    elif "path" not in raw and "discover" not in raw and "catalog" not in raw and not spec.catalog_tables:
        ctx.error("", "missing_location", f"a {fmt} table needs a `path` (or `discover`)",
                  f"catalog names are only supported for {', '.join(f.name for f in FORMATS if f.catalog_tables)} "
                  "tables")
    policy = m.TablePolicy(
        name=raw["name"], format=fmt, path=raw.get("path"), discover=discover, catalog=catalog,
        tags=tuple(raw.get("tags") or ()), owner=raw.get("owner"), description=raw.get("description"),
        enabled=raw.get("enabled", True), compaction=comp, retention=retention, sink=sink,
        source=ctx.ref(""), locations=dict(ctx.locations), declared=declared,
    )
    return policy, ctx.diags


def _compaction(ctx: _Ctx, c: Mapping[str, Any], fmt: str) -> m.Compaction:
    p = "compaction"
    for key in c:  # a format's own maintenance keys (``compaction_keys``) on another format's table
        owners = [f.name for f in FORMATS if key in f.compaction_keys]
        if owners and fmt not in owners:
            ctx.error(f"{p}.{key}", "compaction_key_format",
                      f"compaction.{key} is a setting of {' and '.join(owners)} tables: it does not apply to {fmt} "
                      "tables", f"remove compaction.{key} from this table's policy (or its defaults)")
    target = ctx.size(c, "target_file_size", p, m.DEFAULT_TARGET_FILE_SIZE)
    if target is None:  # not a size (reported): check the rest against the default
        target = m.DEFAULT_TARGET_FILE_SIZE
    min_size = ctx.size(c, "min_file_size", p, None)
    if target < 2**20:
        ctx.error(f"{p}.target_file_size", "target_too_small",
                  f"target_file_size {format_setting_size(target)} is below 1MiB", "use at least 1MiB (typical: 128MB-1GB)")
    if min_size is None:
        min_size = int(target * m.DEFAULT_MIN_FILE_RATIO)
    elif min_size > target:
        ctx.error(f"{p}.min_file_size", "min_gt_target",
                  f"min_file_size ({format_setting_size(min_size)}) is larger than target_file_size "
                  f"({format_setting_size(target)})",
                  "min_file_size must be <= target_file_size (default 75% of it)")
    strategy = c.get("strategy", "bin_pack")
    z = tuple(c.get("z_order_by") or ())
    s = tuple(c.get("sort_by") or ())
    if strategy == "z_order" and not z:
        ctx.error(f"{p}.strategy", "missing_z_order_by", "strategy z_order needs z_order_by", "list the columns to cluster by")
    if strategy == "sort" and not s:
        ctx.error(f"{p}.strategy", "missing_sort_by", "strategy sort needs sort_by", "list the columns to sort by")
    if z and strategy != "z_order":
        ctx.error(f"{p}.z_order_by", "option_without_strategy", "z_order_by is set but strategy is not z_order")
    if s and strategy != "sort":
        ctx.error(f"{p}.sort_by", "option_without_strategy", "sort_by is set but strategy is not sort")
    if len(set(z)) != len(z) or len(set(s)) != len(s):
        ctx.error(f"{p}.{'z_order_by' if len(set(z)) != len(z) else 'sort_by'}", "duplicate_column",
                  "a column is listed twice")
    t = c.get("triggers") or {}
    ratio = t.get("min_small_file_ratio", 0.0)
    if not (0 <= ratio <= 1):  # also catches .nan, which passes JSON Schema's minimum/maximum
        ctx.error(f"{p}.triggers.min_small_file_ratio", "out_of_range", f"{ratio} is not between 0 and 1")
        t = {**t, "min_small_file_ratio": 0.0}
    t = _format_triggers(ctx, t, fmt, f"{p}.triggers")
    deleted = t.get("max_deleted_rows_ratio")
    triggers = m.Triggers(min_input_files=t.get("min_input_files", 5),
                          min_file_reduction=t.get("min_file_reduction", 0),
                          min_small_file_ratio=float(t.get("min_small_file_ratio", 0.0)),
                          max_deleted_rows_ratio=None if deleted is None else float(deleted),
                          delete_file_threshold=t.get("delete_file_threshold"))
    parts = c.get("partitions") or {}
    where = parts.get("where")
    if where is not None:
        try:
            parse_where(where)
        except PredicateError as e:
            ctx.error(f"{p}.partitions.where", "invalid_where", str(e),
                      "a Spark SQL predicate on partition columns, e.g. date >= '2024-01-01'")
    lookback = None
    if "lookback" in parts:
        lb = parts["lookback"]
        secs = ctx.duration(lb, "period", f"{p}.partitions.lookback", 0) or 0
        lookback = m.Lookback(column=lb["column"], seconds=secs, date_format=lb.get("format"))
    pd, mf = c.get("position_deletes") or {}, c.get("manifests") or {}
    purge = _purge(ctx, c.get("purge") or {}, f"{p}.purge")
    b = c.get("budget") or {}
    budget = m.Budget(max_bytes_per_run=ctx.size(b, "max_bytes_per_run", f"{p}.budget", None),
                      max_partitions_per_run=b.get("max_partitions_per_run"))
    return m.Compaction(
        enabled=c.get("enabled", True), strategy=strategy, z_order_by=z, sort_by=s,
        target_file_size=target, min_file_size=min_size, triggers=triggers,
        partitions=m.PartitionScope(where=where, lookback=lookback, skip_latest=parts.get("skip_latest", 0)),
        quiet_period=ctx.duration(c, "quiet_period", p, None), budget=budget,
        order=c.get("order", "benefit"), method=c.get("method", "auto"),
        position_deletes=m.PositionDeletes(enabled=pd.get("enabled", False),
                                           min_input_files=pd.get("min_input_files", m.DEFAULT_MIN_DELETE_FILES)),
        manifests=m.Manifests(enabled=mf.get("enabled", False), min_count=mf.get("min_count", m.DEFAULT_MIN_MANIFESTS)),
        purge=purge,
    )


def _purge(ctx: _Ctx, u: Mapping[str, Any], p: str) -> m.Purge:
    """``compaction.purge``; a ratio outside 0..1 (NaN too: JSON Schema's bounds let it through) is reported
    and replaced by the default."""
    ratio = u.get("min_deleted_ratio", m.DEFAULT_PURGE_RATIO)
    if not (0 <= ratio <= 1):
        ctx.error(f"{p}.min_deleted_ratio", "out_of_range", f"{ratio} is not between 0 and 1")
        ratio = m.DEFAULT_PURGE_RATIO
    return m.Purge(enabled=u.get("enabled", False), min_deleted_rows=u.get("min_deleted_rows"),
                   min_deleted_ratio=float(ratio))


def _format_triggers(ctx: _Ctx, t: Mapping[str, Any], fmt: str, p: str) -> Mapping[str, Any]:
    """``t`` less the trigger keys other formats own (each an error naming the formats that take it), and a
    ``max_deleted_rows_ratio`` outside 0..1 (NaN too: JSON Schema's bounds let it through)."""
    out = dict(t)
    for key in t:
        owners = [f.name for f in FORMATS if key in f.trigger_keys]
        if owners and fmt not in owners:
            ctx.error(f"{p}.{key}", "trigger_key_format",
                      f"triggers.{key} is a setting of {' and '.join(owners)} tables: it does not apply to {fmt} tables",
                      "remove it, or set it on the tables of " + " and ".join(owners))
            del out[key]
    ratio = out.get("max_deleted_rows_ratio")
    if ratio is not None and not (0 < ratio <= 1):
        ctx.error(f"{p}.max_deleted_rows_ratio", "out_of_range", f"{ratio} is not above 0 and at most 1")
        del out["max_deleted_rows_ratio"]
    return out


def _retention(ctx: _Ctx, r: Mapping[str, Any], fmt: str) -> m.Retention:
    p = "retention"
    spec = format_spec(fmt) or FORMATS[0]
    for key in r:
        owners = [f.name for f in FORMATS if key in f.retention_keys]
        if owners and fmt not in owners:
            own = sorted(spec.retention_keys | _SHARED_RETENTION_KEYS)
            ctx.error(f"{p}.{key}", "retention_key_format",
                      f"retention.{key} is a setting of {' and '.join(owners)} tables: it does not apply to {fmt} tables",
                      f"the retention keys {fmt} tables take: {', '.join(own)}")
    lag = ctx.duration(r, "min_reader_lag", p, None)
    unsafe = r.get("allow_unsafe_retention", False)
    deleted = ctx.duration(r, "deleted_file_retention", p, m.DEFAULT_DELETED_FILE_RETENTION)
    log = ctx.duration(r, "log_retention", p, None)
    assert deleted is not None
    if "deleted_file_retention" in spec.retention_keys:  # the VACUUM horizon (its default is checked too)
        _horizon(ctx, f"{p}.deleted_file_retention", "deleted_file_retention", deleted, unsafe, lag)
        if log is not None and log < deleted:
            ctx.error(f"{p}.log_retention", "log_retention_too_short",
                      "log_retention is shorter than deleted_file_retention",
                      "time travel needs the log as long as the data files", severity="warning")
    if unsafe and lag is None:
        ctx.error(f"{p}.allow_unsafe_retention", "missing_min_reader_lag",
                  "allow_unsafe_retention requires min_reader_lag", "declare how far the slowest reader may lag")
    v = r.get("vacuum") or {}
    e = r.get("expire_snapshots") or {}
    expire_age = ctx.duration(e, "older_than", f"{p}.expire_snapshots", None)
    expire = m.ExpireSnapshots(
        enabled=e.get("enabled", False), retain_last=e.get("retain_last", 1),
        older_than=m.DEFAULT_SNAPSHOT_RETENTION if expire_age is None else expire_age)
    if expire.enabled:  # time travel and lagging readers read the snapshots it expires
        _horizon(ctx, f"{p}.expire_snapshots.older_than", "expire_snapshots.older_than", expire.older_than, unsafe, lag)
    o = r.get("remove_orphan_files") or {}
    orphan_age = ctx.duration(o, "older_than", f"{p}.remove_orphan_files", None)
    orphans = m.RemoveOrphanFiles(enabled=o.get("enabled", False),
                                  older_than=m.DEFAULT_ORPHAN_AGE if orphan_age is None else orphan_age)
    if orphans.enabled and orphans.older_than < m.SAFE_MIN_ORPHAN_AGE and not unsafe:
        # no reader reads an orphan, but a writer's files are unreferenced until it commits
        ctx.error(f"{p}.remove_orphan_files.older_than", "unsafe_retention",
                  f"remove_orphan_files.older_than below 1 day ({orphans.older_than}s) can delete the files of a "
                  "write that has not committed yet",
                  "set allow_unsafe_retention: true and declare min_reader_lag")
    return m.Retention(deleted_file_retention=deleted, log_retention=log,
                       vacuum=m.Vacuum(enabled=v.get("enabled", False), dry_run_first=v.get("dry_run_first", True)),
                       allow_unsafe_retention=unsafe, min_reader_lag=lag,
                       manage_properties=r.get("manage_properties", True), expire_snapshots=expire,
                       remove_orphan_files=orphans)


#: the keys of ``retention:`` every format that takes the block takes (no format owns them)
_SHARED_RETENTION_KEYS = frozenset({"allow_unsafe_retention", "min_reader_lag"})


def _horizon(ctx: _Ctx, key: str, name: str, seconds: int, unsafe: bool, lag: int | None) -> None:
    """A retention readers depend on (a VACUUM's, a snapshot expiry's): at least 7 days unless declared
    unsafe, and never below the slowest reader."""
    if seconds < m.SAFE_MIN_RETENTION and not unsafe:
        ctx.error(key, "unsafe_retention", f"{name} below 7 days ({seconds}s) can break readers and time travel",
                  "set allow_unsafe_retention: true and declare min_reader_lag")
    if lag is not None and seconds < lag:
        ctx.error(key, "retention_below_reader_lag", f"{name} ({seconds}s) is shorter than min_reader_lag ({lag}s)",
                  "retention must cover the slowest reader, even with allow_unsafe_retention")


def _file_source(ctx: _Ctx, s: Mapping[str, Any]) -> m.FileSource:
    p = "sink.source"
    src = m.FileSource(compact_interval=s.get("compact_interval"),
                       cleanup_delay=ctx.duration(s, "cleanup_delay", p, None),
                       max_file_age=ctx.duration(s, "max_file_age", p, None), clean_source=s.get("clean_source"),
                       source_archive_dir=s.get("source_archive_dir"))
    if src.clean_source == "archive" and not src.source_archive_dir:
        ctx.error(f"{p}.clean_source", "archive_without_dir", "clean_source: archive needs source_archive_dir",
                  "e.g. source_archive_dir: s3://bucket/archive/clicks")
    if src.source_archive_dir and src.clean_source != "archive":
        ctx.error(f"{p}.source_archive_dir", "archive_dir_unused",
                  "source_archive_dir is used only with clean_source: archive", severity="warning")
    return src


def _sink(ctx: _Ctx, s: Mapping[str, Any]) -> m.Sink:
    p = "sink"
    sink = m.Sink(
        compact_interval=s.get("compact_interval"), min_batches_to_retain=s.get("min_batches_to_retain"),
        cleanup_delay=ctx.duration(s, "cleanup_delay", p, None), retention=ctx.duration(s, "retention", p, None),
        grace_period=ctx.duration(s, "grace_period", p, 3600) or 0,
        writer_stopped_check=s.get("writer_stopped_check", True),
        quiet_period=ctx.duration(s, "quiet_period", p, 600) or 0, checkpoint=s.get("checkpoint"),
        downstream_streaming_readers=s.get("downstream_streaming_readers", "unknown"),
        prune=s.get("prune", False), prune_delete_files=s.get("prune_delete_files", False),
        source=_file_source(ctx, s["source"]) if isinstance(s.get("source"), Mapping) else None,
    )
    if sink.prune and sink.retention is None:
        ctx.error(f"{p}.prune", "prune_without_retention", "sink.prune needs sink.retention", "e.g. retention: 30d")
    return sink
