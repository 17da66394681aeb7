"""Every command on s3:// and az:// Delta tables through the CLI (real subprocesses), with credentials
from the profile (Jinja env_var): the secrets appear in no artifact, no output, no log line and no error,
also when a storage option is invalid and delta-rs echoes it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from compactor.runtime.storage import Storage
from tests.objectstore.helpers import exactly_once, make_table

REPO = Path(__file__).resolve().parents[2]


def _profiles(server, secret_env: dict[str, str]) -> str:
    """A profile with two targets: a good one, and one with an invalid option whose value holds a secret."""
    so = server.storage_options
    if server.kind == "s3":
        good = {"AWS_ENDPOINT_URL": so["AWS_ENDPOINT_URL"], "AWS_ALLOW_HTTP": "true", "AWS_REGION": "us-east-1",
                "AWS_ACCESS_KEY_ID": "{{ env_var('TEST_KEY_ID') }}",
                "AWS_SECRET_ACCESS_KEY": "{{ env_var('TEST_SECRET') }}", "aws_conditional_put": "etag"}
        bad = {**good, "AWS_ALLOW_HTTP": "maybe-{{ env_var('TEST_SECRET') }}"}
    else:
        good = {"AZURE_STORAGE_ACCOUNT_NAME": so["AZURE_STORAGE_ACCOUNT_NAME"],
                "AZURE_STORAGE_ACCOUNT_KEY": "{{ env_var('TEST_SECRET') }}",
                "AZURE_STORAGE_USE_EMULATOR": "true", "AZURE_ALLOW_HTTP": "true"}
        bad = {**good, "timeout": "maybe-{{ env_var('TEST_SECRET') }}"}

    def block(opts: dict[str, str]) -> str:
        return "".join(f'        {k}: "{v}"\n' for k, v in opts.items())

    return (f"lake:\n  target: good\n  outputs:\n    good:\n      engine: local\n      storage_options:\n{block(good)}"
            f"    bad:\n      engine: local\n      storage_options:\n{block(bad)}")


@pytest.fixture(params=["s3", "azure"])
def cloud(request):
    server = request.getfixturevalue("s3_server" if request.param == "s3" else "azure_server")
    if server.kind == "s3":
        # moto accepts any credentials: fresh random ones, so a leak is unmistakable
        secrets = {"TEST_KEY_ID": f"AKIATEST{uuid.uuid4().hex[:12].upper()}", "TEST_SECRET": f"s3cr3t/{uuid.uuid4().hex}"}
        so = {**server.storage_options, "AWS_ACCESS_KEY_ID": secrets["TEST_KEY_ID"],
              "AWS_SECRET_ACCESS_KEY": secrets["TEST_SECRET"]}
    else:
        secrets = {"TEST_SECRET": server.storage_options["AZURE_STORAGE_ACCOUNT_KEY"]}
        so = dict(server.storage_options)
    return server, secrets, so


def test_every_command_on_the_store_keeps_secrets_out(cloud, tmp_path: Path):
    server, secrets, so = cloud
    uri = server.uri(f"lake-{uuid.uuid4().hex[:8]}/orders")
    n = make_table(uri, so, partitions=2, appends=3)
    proj = tmp_path / "proj"
    (proj / "policies").mkdir(parents=True)
    (proj / "compactor.yml").write_text("name: lake\nprofile: lake\n")
    (proj / "profiles.yml").write_text(_profiles(server, secrets))
    (proj / "policies" / "t.yml").write_text(
        f"version: 1\ntables:\n  - name: orders\n    path: {uri}\n"
        "    compaction: {target_file_size: 1MiB, triggers: {min_input_files: 2}}\n")
    env = {**os.environ, **server.env, **secrets}
    outputs: list[str] = []

    def cli(*args: str, code: int | None = 0) -> subprocess.CompletedProcess:
        r = subprocess.run([sys.executable, "-m", "compactor", *args], cwd=proj, env=env, capture_output=True,
                           text=True, timeout=180)
        outputs.append(f"$ {' '.join(args)}\n{r.stdout}\n{r.stderr}")
        if code is not None:
            assert r.returncode == code, outputs[-1]
        return r

    cli("validate")
    cli("plan", "--metrics", "target/plan.prom")
    plan = json.loads((proj / "target" / "plan.json").read_text())
    assert [a["type"] for a in plan["tables"][0]["actions"]] == ["compact", "compact"], plan["tables"][0]
    assert set(plan["target"]["storage_options"].values()) == {"***"}
    cli("apply", "target/plan.json", "--metrics", "target/apply.prom", "--debug")
    results = json.loads((proj / "target" / "run_results.json").read_text())
    assert [r["status"] for r in results["results"]] == ["success", "success"]
    exactly_once(uri, so, n)
    r = cli("inspect", uri, "--format", "json")
    assert json.loads(r.stdout)["file_count"] == 2
    cli("report")
    cli("history")
    cli("history", "--format", "json")
    # an invalid option (its value holds the secret): delta-rs echoes the value; compactor must not
    r = cli("plan", "-t", "bad", "--out", "target/bad-plan.json", code=1)
    bad = json.loads((proj / "target" / "bad-plan.json").read_text())["tables"][0]["error"]
    assert "***" in bad and "maybe" not in bad, bad
    cli("apply", "-t", "bad", "--auto-approve", code=None)
    cli("inspect", uri, "-t", "bad", "--debug", code=None)

    artifacts = {str(p.relative_to(proj)): p.read_text(errors="replace") for p in (proj / "target").rglob("*")
                 if p.is_file()}
    assert {"target/plan.json", "target/run_results.json", "target/plan.prom", "target/apply.prom",
            "target/report.html"} <= {f"target/{k}" for k in (Path(a).relative_to("target").as_posix()
                                                               for a in artifacts)}
    assert any(k.startswith("target/history/") for k in artifacts)
    st = Storage(uri, so)  # what compactor left on the store: lease, commit metadata
    for o in st.list("_compactor") + st.list("_delta_log"):
        artifacts[f"store:{o.path}"] = st.read_bytes(o.path).decode(errors="replace")
    text = "\n".join(outputs)
    for name, secret in secrets.items():
        leaks = [k for k, v in artifacts.items() if secret in v]
        assert not leaks, f"{name} leaked into {leaks}"
        assert secret not in text, f"{name} leaked into CLI output"


def test_spark_credentials_in_the_profile_are_redacted_from_the_plan_target():
    from compactor.project.model import SparkSettings, Target

    secret = f"s3a-secret-{uuid.uuid4().hex}"
    t = Target(engine="spark", storage_options={"AWS_SECRET_ACCESS_KEY": secret, "AWS_REGION": "eu-west-1"},
               spark=SparkSettings(conf={"spark.hadoop.fs.s3a.secret.key": secret,
                                         "spark.hadoop.fs.s3a.access.key": "AKIA-something",
                                         "spark.hadoop.fs.azure.account.key.acc.dfs.core.windows.net": "k",
                                         "spark.hadoop.fs.s3a.some.option": secret,  # same value as an option
                                         "spark.sql.shuffle.partitions": "8"}))
    red = t.redacted()
    assert secret not in json.dumps(red)
    assert red["spark"]["conf"]["spark.sql.shuffle.partitions"] == "8"
    assert set(red["spark"]["conf"].values()) == {"***", "8"}


def test_log_lines_and_errors_are_redacted():
    import io
    import logging

    from compactor.errors import TableReadError
    from compactor.runtime.secrets import RedactingFilter, error_text, redact_error, register_secrets

    secret = f"key-{uuid.uuid4().hex}"
    register_secrets({"AZURE_STORAGE_ACCOUNT_KEY": secret, "AZURE_ALLOW_HTTP": "true", "max_retries": "3"})
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(RedactingFilter())
    logger = logging.getLogger("compactor.test-redaction")
    logger.addHandler(handler)
    try:
        logger.warning("could not renew with %s", secret)
        try:
            raise ValueError(f"bad {secret}")
        except ValueError:
            logger.exception("failed")
    finally:
        logger.removeHandler(handler)
    assert secret not in stream.getvalue() and stream.getvalue().count("***") == 2
    e = redact_error(TableReadError(f"x: {secret}", hint=f"check {secret}"))
    assert secret not in str(e) and secret not in e.message and secret not in e.hint
    # a Rust error chain becomes one line; booleans and small numbers are not treated as secrets
    assert error_text(f"Generic error\n  \x1b[31m↳\x1b[0m failed to parse \"{secret}\"\n   ↳ true, 3") == \
        'Generic error: failed to parse "***": true, 3'
