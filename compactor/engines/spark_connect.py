"""Spark Connect sessions for the spark engine: the profile's ``spark.remote: sc://host:port`` (or pyspark's
own ``SPARK_REMOTE``) reaches a running Spark Connect server over gRPC, so that no JVM starts on this
machine and nothing here looks for Java.

Before the session is created, one gRPC call with a deadline checks that something answers at the URL:
pyspark's client retries an unreachable server for about ten minutes, so a wrong URL would otherwise hang
the run instead of failing it with one line. The profile's ``conf`` is applied with ``spark.conf.set``
(static and cluster settings cannot change in a session: they are skipped with a warning, set them where
the server starts); compactor's own required settings are session settings and always apply.

There is no ``_jvm``, ``_jsc`` or ``sparkContext`` over Connect: whether the server has what a table
format needs (engines/spark_needs.py) is asked through Spark itself (the format's SQL extension configured,
and its data source resolvable).
pyspark's Connect client is imported lazily, only for a remote session.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping, Sequence
from typing import Any

from compactor.engines.spark_needs import REQUIRED_CONF, SparkNeeds, extension_listed
from compactor.errors import UsageError
from compactor.project.model import SparkSettings, shown_remote

log = logging.getLogger(__name__)

#: seconds the reachability check waits for an answer (an unreachable port fails at once)
CONNECT_TIMEOUT_S = 10.0
#: an absolute path no table lives at: Spark resolves a format's data source before it looks at the path
_PROBE_PATH = "/compactor-source-probe/does-not-exist"
_CONNECT_HINT = ("start the server (scripts/spark-connect-server PORT starts one on this machine) or fix spark.remote "
                 "in profiles.yml")


def is_connect(spark: Any) -> bool:
    """Whether ``spark`` is a Spark Connect session (no JVM in this process)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def env_remote(settings: SparkSettings) -> str | None:
    """pyspark's ``SPARK_REMOTE`` (used by compactor when no session is active and the profile sets no
    ``remote``). pyspark itself refuses a master together with it; compactor does the same, clearly."""
    url = os.environ.get("SPARK_REMOTE", "").strip()
    if not url:
        return None
    if not url.startswith("sc://"):
        raise UsageError(f"SPARK_REMOTE={url!r}: compactor reaches a running Spark Connect server (sc://host:port) "
                         "and does not start one", hint="set SPARK_REMOTE to the server's sc:// URL, or unset it")
    if settings.master:
        raise UsageError(f"SPARK_REMOTE is set ({shown_remote(url)}) and the profile sets spark.master "
                         f"{settings.master!r}: a session either starts Spark or connects to a server",
                         hint="unset SPARK_REMOTE, or remove spark.master from the profile")
    return url


def _condition(e: BaseException) -> str | None:
    get = getattr(e, "getCondition", None)
    return get() if callable(get) else None


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return (text.splitlines()[0] if text else type(e).__name__)[:300]


def _channel_builder(url: str) -> Any:
    try:
        from pyspark.sql.connect.client import DefaultChannelBuilder
    except ImportError as e:
        raise UsageError(f"spark.remote needs pyspark's Spark Connect client ({_first_line(e)})",
                         hint="pip install 'compactor[spark]' (it installs pyspark[connect])") from None
    try:
        return DefaultChannelBuilder(url)
    except Exception as e:  # noqa: BLE001 - PySparkValueError: a malformed sc:// URL
        raise UsageError(f"spark.remote {shown_remote(url)}: {_first_line(e)}") from None


def check_reachable(url: str, timeout_s: float = CONNECT_TIMEOUT_S) -> None:
    """Raise a UsageError naming the URL when no gRPC server answers there within ``timeout_s``. One call
    to the standard gRPC health service, without retries: any answer (a Spark Connect server does not
    implement that service, so usually UNIMPLEMENTED) means a server is there."""
    import grpc

    from compactor.runtime.secrets import register_secrets

    # a token in the URL never reaches a message or log line (pyspark's own errors quote the URL)
    register_secrets({f"token{i}": t for i, t in enumerate(re.findall(r";token=([^;]+)", url))})
    builder = _channel_builder(url)
    channel = builder.toChannel()
    try:
        channel.unary_unary("/grpc.health.v1.Health/Check")(b"", timeout=timeout_s)
    except grpc.RpcError as e:
        code = e.code() if callable(getattr(e, "code", None)) else None
        if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
            details = e.details() if callable(getattr(e, "details", None)) else ""
            why = "no answer within %g s" % timeout_s if code == grpc.StatusCode.DEADLINE_EXCEEDED else \
                (details or "unavailable").splitlines()[0][:300]
            raise UsageError(f"cannot reach the Spark Connect server at {shown_remote(url)}: {why}",
                             hint=_CONNECT_HINT) from None
    finally:
        channel.close()


def connect_session(url: str, settings: SparkSettings, needs: Sequence[SparkNeeds] = ()) -> Any:
    """A new Spark Connect session to ``url`` with the profile's runtime settings and compactor's own. The
    server must have what each required need asks for (a server's jars and static settings are its own:
    nothing of them is set from here)."""
    check_reachable(url)
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    session = ConnectSession.builder.remote(url).create()
    try:
        _apply_conf(session, {**settings.conf, **REQUIRED_CONF}, shown_remote(url))
        for need in needs:
            if need.required and not source_available(session, need):
                raise UsageError(f"{need.setting} is true but the Spark Connect server at {shown_remote(url)} has no "
                                 f"{need.name} (its data source or SQL extension is missing)", hint=need.connect_hint)
    except BaseException:
        session.stop()
        raise
    return session


def _apply_conf(session: Any, conf: Mapping[str, str], shown: str) -> None:
    skipped = []
    for k, v in conf.items():
        try:
            session.conf.set(k, v)
        except Exception as e:  # noqa: BLE001 - pyspark's Connect errors, by condition
            if (_condition(e) or "").startswith("CANNOT_MODIFY_"):  # _CONFIG (Spark core), _STATIC_CONFIG (SQL)
                skipped.append(k)
                continue
            raise UsageError(f"spark.conf {k} over Spark Connect ({shown}): {_first_line(e)}") from None
    if skipped:
        log.warning("Spark Connect (%s): %s cannot change in a session (static or cluster settings): skipped; "
                    "set them where the server starts", shown, ", ".join(sorted(skipped)))


def source_available(spark: Any, needs: SparkNeeds) -> bool:
    """Whether a Spark Connect server has what ``needs`` asks for: its SQL extension configured (the
    setting alone is not enough: Spark skips an extension whose class is missing, with a warning in the
    server's log) and its data source resolvable (it is resolved before the path is looked at, so a path
    where no table lives answers PATH_NOT_FOUND with the jars, DATA_SOURCE_NOT_FOUND without)."""
    if not extension_listed(needs, spark.conf.get("spark.sql.extensions", "")):
        return False
    if needs.data_source is None:
        return True
    try:
        spark.read.format(needs.data_source).load(_PROBE_PATH).schema  # noqa: B018 - analysis only, no job
    except Exception as e:  # noqa: BLE001 - pyspark's Connect errors, by condition
        return _condition(e) != "DATA_SOURCE_NOT_FOUND"
    return True
