"""Typed project and profile models."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from compactor.models.catalog import CatalogSettings

Engine = Literal["local", "spark"]

REDACTED = "***"
#: seconds apply keeps watching a table's log after committing (it reports a later commit that removes
#: the same files again); profile key ``watch_window``, environment COMPACTOR_WATCH_WINDOW. Off by
#: default: the next plan finds what another writer duplicated and plans its repair (README, Safety
#: model), so a scheduled apply returns as soon as its work is done.
DEFAULT_WATCH_WINDOW_S = 0.0
#: commit groups (partial progress) of apply: at most this many bins and input bytes per commit
DEFAULT_COMMIT_EVERY_BINS = 100
DEFAULT_COMMIT_EVERY_BYTES = 16 * 2**30
#: Spark settings whose values are credentials (fs.s3a.secret.key, fs.azure.account.key..., sas tokens)
_SECRET_CONF = re.compile(r"secret|password|token|credential|sas|signature|(^|[._])(access[._])?key($|[._])",
                          re.IGNORECASE)


def _redacted_conf(conf: Mapping[str, str], storage_options: Mapping[str, str]) -> dict[str, str]:
    secrets = {str(v) for v in storage_options.values() if len(str(v)) >= 8}
    return {k: REDACTED if _SECRET_CONF.search(k) or str(v) in secrets else v for k, v in conf.items()}


def shown_remote(url: str) -> str:
    """A Spark Connect URL as printed: ``sc://host:port`` without its parameters (``;token=...``)."""
    return url.split(";", 1)[0].rstrip("/")


@dataclass(frozen=True)
class SparkSettings:
    """A target's ``spark:`` block: the session the spark engine uses, its conf and the jars it loads."""

    master: str | None = None  # None: reuse an active session, else local[*]
    #: a running Spark Connect server, ``sc://host:port`` (no JVM on this machine); never with ``master``
    remote: str | None = None
    app_name: str = "compactor"
    conf: Mapping[str, str] = field(default_factory=dict)
    #: load the Delta Lake jars into a session compactor builds (delta.configure_spark_with_delta_pip):
    #: "auto" tries and falls back to a session without them, True requires them, False never loads them
    delta_jars: bool | str = "auto"
    #: extra Maven coordinates for spark.jars.packages (e.g. org.apache.hadoop:hadoop-aws:3.4.2)
    packages: tuple[str, ...] = ()


@dataclass(frozen=True)
class Target:
    """One output of a profile (dbt's 'target'): which engine and how to reach storage."""

    name: str = "dev"
    profile: str = "default"
    engine: Engine = "local"
    spark: SparkSettings = field(default_factory=SparkSettings)
    #: object-store options passed to delta-rs; secrets: never printed or serialised
    storage_options: Mapping[str, str] = field(default_factory=dict, repr=False)
    #: bins rewritten at once (profile key ``max_concurrent_rewrites``; ``threads`` is its old name):
    #: the local engine's thread pool (None: the machine's cores). The spark engine writes a commit group
    #: as one Spark job whatever it is, except 1: a job per bin, one after the other (sequential)
    threads: int | None = None
    #: partial progress: consecutive rewrites of a table are committed together, at most this many bins
    #: and bytes (a partition larger than that is committed alone); profile keys ``commit_every_bins``,
    #: ``commit_every_bytes``. 1 bin: one commit per partition
    commit_every_bins: int = DEFAULT_COMMIT_EVERY_BINS
    commit_every_bytes: int = DEFAULT_COMMIT_EVERY_BYTES
    #: run-level time budget (profile key ``max_runtime``, ``apply --max-runtime``): no new commit
    #: group starts after it; what is under way finishes and commits. None: no budget
    max_runtime_s: float | None = None
    #: how long apply watches a table's log after committing to it (tasks/watch.py); 0 turns it off
    watch_window_s: float = DEFAULT_WATCH_WINDOW_S
    #: the catalogs that name tables (profile key ``catalogs``), by name; option values are secrets
    catalogs: Mapping[str, CatalogSettings] = field(default_factory=dict, repr=False)
    #: every target of the same profile, by name, with its engine (where a hint may point: "use the spark
    #: engine: `compactor plan --target prod`")
    profile_targets: Mapping[str, str] = field(default_factory=dict)

    @property
    def spark_target(self) -> str | None:
        """A target of the same profile that runs the spark engine (this one, if it does), or None."""
        if self.engine == "spark":
            return self.name
        return next((n for n, e in self.profile_targets.items() if e == "spark"), None)

    @property
    def runs_spark(self) -> bool:
        """Whether a command on this target may start or reach Spark: the spark engine, or a Hive catalog
        (looked up through a SparkSession whatever the engine)."""
        return self.engine == "spark" or any(c.type == "hive" for c in self.catalogs.values())

    def redacted(self) -> dict[str, Any]:
        """A serialisable description without secrets (for plans, results and logs)."""
        return {
            "name": self.name,
            "profile": self.profile,
            "engine": self.engine,
            "spark": {"master": self.spark.master,
                      **({"remote": shown_remote(self.spark.remote)} if self.spark.remote else {}),
                      "app_name": self.spark.app_name,
                      "conf": _redacted_conf(self.spark.conf, self.storage_options), "delta_jars": self.spark.delta_jars,
                      "packages": list(self.spark.packages)} if self.engine == "spark" else None,
            "storage_options": {k: REDACTED for k in self.storage_options},
            **({"catalogs": {n: {"type": c.type, **{k: REDACTED for k in c.options}} for n, c in self.catalogs.items()}}
               if self.catalogs else {}),
        }


@dataclass(frozen=True)
class DbtSettings:
    """compactor.yml ``dbt:``: a dbt project whose models carry policies in ``meta.compactor``."""

    #: the manifest dbt writes (``target/manifest.json``; ``dbt parse`` writes it without a warehouse)
    manifest: Path
    #: the dbt project's folder (dbt_project.yml, models/): where policies are written, for positions
    project_dir: Path
    #: the target's catalog that locates each node's relation (None: the target's only catalog)
    catalog: str | None = None


@dataclass(frozen=True)
class Project:
    """compactor.yml: the project's name, root, policy paths, defaults, vars and profile."""

    name: str
    root: Path
    policy_paths: tuple[str, ...] = ("policies",)
    target_path: str = "target"
    #: project-wide policy defaults (raw, as rendered YAML); merged under file defaults and tables
    defaults: Mapping[str, Any] = field(default_factory=dict)
    vars: Mapping[str, Any] = field(default_factory=dict)
    #: the profile compactor.yml names (None: it names none; then profiles.yml's "default", or its only one)
    profile: str | None = None
    #: path of compactor.yml (for diagnostics)
    file: Path | None = None
    #: a dbt project whose nodes carry policies (None: policy files only)
    dbt: DbtSettings | None = None

    @property
    def target_dir(self) -> Path:
        p = Path(self.target_path)
        return p if p.is_absolute() else self.root / p


@dataclass(frozen=True)
class ProjectOptions:
    """Options shared by every command (dbt-style)."""

    project_dir: Path = Path(".")
    profiles_dir: Path | None = None
    target: str | None = None
    vars: Mapping[str, Any] = field(default_factory=dict)
    select: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
