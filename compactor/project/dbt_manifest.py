"""Read a dbt manifest (``target/manifest.json``, dbt >= 1.8): the models, snapshots and seeds whose
``meta.compactor`` holds a compactor policy. Plain JSON: dbt need not be installed."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: manifest schema versions compactor reads: v12 is written by dbt 1.8 and later
MIN_MANIFEST_VERSION = 12
#: the dbt resource types that are tables, and the key of their entries in a properties YAML file
RESOURCE_KEYS = {"model": "models", "snapshot": "snapshots", "seed": "seeds"}
#: the model materializations that leave files to compact (a view or an ephemeral model has none)
TABLE_MATERIALIZATIONS = ("table", "incremental")


class ManifestError(Exception):
    """The manifest cannot be read; the message says why."""


@dataclass(frozen=True)
class DbtNode:
    """One model, snapshot or seed of the manifest that carries a ``compactor`` meta entry."""

    unique_id: str
    name: str
    resource_type: str
    package: str
    materialized: str
    database: str | None
    schema: str
    alias: str
    #: dbt-spark/databricks ``file_format`` (delta, parquet, iceberg, ...); None: the adapter's default
    file_format: str | None
    #: dbt-spark/databricks ``location_root``: the table lives at ``<location_root>/<alias>``
    location_root: str | None
    tags: tuple[str, ...]
    #: the node's ``meta.compactor`` as dbt resolved it (its own meta replaces dbt_project.yml ``+meta``)
    policy: Any
    #: the model's SQL (or seed's CSV) file, relative to the dbt project
    original_file_path: str
    #: the properties YAML that describes the node, relative to the dbt project (None: none does)
    patch_path: str | None
    fqn: tuple[str, ...]

    @property
    def relation(self) -> str:
        return ".".join(p for p in (self.database, self.schema, self.alias) if p)

    @property
    def is_table(self) -> bool:
        return self.resource_type != "model" or self.materialized in TABLE_MATERIALIZATIONS


def read_manifest(path: Path) -> list[DbtNode]:
    """The nodes of ``path`` that carry a compactor policy, in the manifest's order."""
    try:
        with open(path, "rb") as f:
            doc = json.load(f)
    except FileNotFoundError:
        raise ManifestError(f"no dbt manifest at {path}") from None
    except OSError as e:
        raise ManifestError(f"cannot read the dbt manifest {path}: {e.strerror or e}") from None
    except ValueError as e:
        raise ManifestError(f"the dbt manifest {path} is not JSON: {e}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("nodes"), dict):
        raise ManifestError(f"{path} is not a dbt manifest (no `nodes`)")
    version = str((doc.get("metadata") or {}).get("dbt_schema_version", ""))
    m = re.search(r"/manifest/v(\d+)\.json$", version)
    if m is None or int(m.group(1)) < MIN_MANIFEST_VERSION:
        dbt = (doc.get("metadata") or {}).get("dbt_version", "unknown")
        raise ManifestError(f"{path} is a manifest of dbt {dbt} ({version or 'no schema version'}); compactor reads "
                            f"manifests of dbt >= 1.8 (manifest v{MIN_MANIFEST_VERSION} and later)")
    return [n for n in (_node(uid, raw) for uid, raw in doc["nodes"].items()) if n is not None]


def _node(uid: str, raw: Any) -> DbtNode | None:
    if not isinstance(raw, dict) or raw.get("resource_type") not in RESOURCE_KEYS:
        return None
    config = raw.get("config") or {}
    meta = config.get("meta") or raw.get("meta") or {}
    if not isinstance(meta, dict) or "compactor" not in meta:
        return None
    patch = raw.get("patch_path")
    return DbtNode(
        unique_id=uid, name=str(raw.get("name", uid)), resource_type=str(raw["resource_type"]),
        package=str(raw.get("package_name", "")), materialized=str(config.get("materialized", "")),
        database=raw.get("database") or None, schema=str(raw.get("schema", "")),
        alias=str(raw.get("alias") or raw.get("name", "")), file_format=config.get("file_format") or None,
        location_root=config.get("location_root") or None, tags=tuple(str(t) for t in raw.get("tags") or ()),
        policy=meta["compactor"], original_file_path=str(raw.get("original_file_path", "")),
        patch_path=str(patch).split("://", 1)[-1] if patch else None, fqn=tuple(raw.get("fqn") or ()))
