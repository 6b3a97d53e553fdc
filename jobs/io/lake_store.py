"""Where the lake lives: a local directory, or a prefix of an S3 (or S3-compatible) bucket shared by every host.

One `Store` tells each engine how to reach it: delta-rs its storage options, Arrow a file system rooted at the lake
(the plan kernel's executors write through it), Spark its S3A settings, boto3 a client for the lake's lease locks.
On S3, Delta commits are made with S3's conditional writes (`If-None-Match: *` on the log entry: of two writers
of one version exactly one wins, the other retries on the new version), the mutual exclusion Delta needs from an
object store; no local file lock is involved.

S3 settings come from the environment with the AWS names (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
AWS_SESSION_TOKEN, AWS_REGION, AWS_ENDPOINT_URL for an S3-compatible server), or from the Airflow connection named by
REBALANCE_LAKE_CONN_ID (login, password, extra `region_name` / `endpoint_url`, as Airflow's AWS connections have).
Without keys, each engine's default AWS credential chain applies (instance roles). Secrets never reach a message.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pyarrow.fs as pa_fs

from planner.errors import InputError, SourceError

ENV_PREFIX = "REBALANCE_"
OBJECT_SCHEMES = ("s3", "s3a")
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
DEFAULT_REGION = "us-east-1"


@dataclass(frozen=True)
class S3Settings:
    """How to reach the bucket; `secret_key` and `session_token` are never printed."""

    region: str = DEFAULT_REGION
    endpoint: str = ""  # an S3-compatible server's URL; empty for AWS itself
    access_key: str = ""
    secret_key: str = ""
    session_token: str = ""

    def __repr__(self) -> str:
        return f"S3Settings(region={self.region!r}, endpoint={self.endpoint!r}, access_key={self.access_key!r})"

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> S3Settings:
        """The AWS variables, or the Airflow connection REBALANCE_LAKE_CONN_ID names (its fields win)."""
        env = os.environ if env is None else env
        settings = cls(
            region=env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or DEFAULT_REGION,
            endpoint=env.get("AWS_ENDPOINT_URL_S3") or env.get("AWS_ENDPOINT_URL") or "",
            access_key=env.get("AWS_ACCESS_KEY_ID", ""),
            secret_key=env.get("AWS_SECRET_ACCESS_KEY", ""),
            session_token=env.get("AWS_SESSION_TOKEN", ""),
        )
        if conn_id := env.get(ENV_PREFIX + "LAKE_CONN_ID"):
            return settings.from_airflow_connection(conn_id)
        return settings

    def from_airflow_connection(self, conn_id: str) -> S3Settings:
        """These settings with the Airflow connection's login, password, region and endpoint over them."""
        # Imported here: Airflow is heavy and only needed when a connection id is configured.
        from airflow.sdk import BaseHook
        from airflow.sdk.exceptions import AirflowNotFoundException

        try:
            conn = BaseHook.get_connection(conn_id)
        except AirflowNotFoundException:
            raise InputError(f"Airflow connection {conn_id!r} ({ENV_PREFIX}LAKE_CONN_ID) is not defined") from None
        extra: dict[str, Any] = conn.extra_dejson or {}
        return S3Settings(
            region=str(extra.get("region_name") or self.region),
            endpoint=str(extra.get("endpoint_url") or self.endpoint),
            access_key=conn.login or self.access_key,
            secret_key=conn.password or self.secret_key,
            session_token=str(extra.get("aws_session_token") or self.session_token),
        )

    @property
    def plain_http(self) -> bool:
        return self.endpoint.startswith("http://")


@dataclass(frozen=True)
class Store:
    """The lake's root: `local` (an absolute directory) or `bucket` and `prefix` on S3 with its settings."""

    root: str  # what messages show: the absolute directory, or s3://bucket/prefix
    local: Path | None = None
    bucket: str = ""
    prefix: str = ""
    s3: S3Settings | None = None

    def uri(self, *parts: str) -> str:
        """The URI delta-rs and messages use for a path under the lake (an absolute path when local)."""
        return "/".join([self.root.rstrip("/"), *parts])

    def spark_uri(self, *parts: str) -> str:
        """The same path as Spark's Hadoop file systems name it (S3A for S3)."""
        return self.uri(*parts) if self.local else "/".join([f"s3a://{self.bucket}", self.prefix, *parts])

    def delta_options(self) -> dict[str, str]:
        """delta-rs storage options: none locally; on S3 the settings, and commits by conditional put."""
        if self.s3 is None:
            return {}
        options = {"AWS_REGION": self.s3.region, "conditional_put": "etag"}
        if self.s3.endpoint:
            options |= {"AWS_ENDPOINT_URL": self.s3.endpoint, "AWS_ALLOW_HTTP": str(self.s3.plain_http).lower()}
        if self.s3.access_key:
            options |= {"AWS_ACCESS_KEY_ID": self.s3.access_key, "AWS_SECRET_ACCESS_KEY": self.s3.secret_key}
        if self.s3.session_token:
            options["AWS_SESSION_TOKEN"] = self.s3.session_token
        return options

    def filesystem(self) -> pa_fs.FileSystem:
        """An Arrow file system whose root is the lake (picklable: the plan kernel's executors write through it)."""
        if self.local is not None:
            return pa_fs.SubTreeFileSystem(str(self.local), pa_fs.LocalFileSystem())
        assert self.s3 is not None
        endpoint = urlsplit(self.s3.endpoint) if self.s3.endpoint else None
        base = pa_fs.S3FileSystem(
            access_key=self.s3.access_key or None,
            secret_key=self.s3.secret_key or None,
            session_token=self.s3.session_token or None,
            region=self.s3.region,
            endpoint_override=endpoint.netloc if endpoint else None,
            scheme=endpoint.scheme if endpoint else "https",
            allow_bucket_creation=False,
        )
        return pa_fs.SubTreeFileSystem("/".join(p for p in (self.bucket, self.prefix) if p), base)

    def spark_conf(self) -> dict[str, str]:
        """Hadoop settings (without the `spark.hadoop.` prefix) for Spark to read and write the lake through S3A.

        The keys are redacted by Spark wherever it shows configuration (`spark.redaction.regex` matches them)."""
        if self.s3 is None:
            return {}
        conf = {"fs.s3a.endpoint.region": self.s3.region, "fs.s3.impl": "org.apache.hadoop.fs.s3a.S3AFileSystem"}
        if self.s3.endpoint:
            conf |= {
                "fs.s3a.endpoint": self.s3.endpoint,
                "fs.s3a.path.style.access": "true",  # S3-compatible servers rarely serve bucket host names
                "fs.s3a.connection.ssl.enabled": str(not self.s3.plain_http).lower(),
            }
        if self.s3.access_key:
            conf |= {"fs.s3a.access.key": self.s3.access_key, "fs.s3a.secret.key": self.s3.secret_key}
        if self.s3.session_token:
            conf |= {
                "fs.s3a.session.token": self.s3.session_token,
                "fs.s3a.aws.credentials.provider": "org.apache.hadoop.fs.s3a.TemporaryAWSCredentialsProvider",
            }
        return conf

    @cached_property
    def client(self) -> Any:
        """A boto3 S3 client for the lake's bucket (lease locks and the start-up check)."""
        import boto3
        from botocore.config import Config as BotoConfig

        assert self.s3 is not None
        return boto3.client(
            "s3",
            region_name=self.s3.region,
            endpoint_url=self.s3.endpoint or None,
            aws_access_key_id=self.s3.access_key or None,
            aws_secret_access_key=self.s3.secret_key or None,
            aws_session_token=self.s3.session_token or None,
            config=BotoConfig(connect_timeout=5, read_timeout=30, retries={"max_attempts": 3, "mode": "standard"}),
        )

    def key(self, *parts: str) -> str:
        """The object key of a path under the lake."""
        return "/".join(p for p in (self.prefix, *parts) if p)

    def check(self) -> None:
        """Fail with one line when the bucket is missing, the credentials are refused or the endpoint is down."""
        if self.s3 is None:
            return
        from botocore.exceptions import BotoCoreError, ClientError

        where = f" at {self.s3.endpoint}" if self.s3.endpoint else ""
        try:
            self.client.list_objects_v2(Bucket=self.bucket, Prefix=self.key(""), MaxKeys=1)
        except ClientError as e:
            code = e.response.get("Error", {}).get("Code", "")
            if code == "NoSuchBucket":
                raise SourceError(f"lake {self.root}: bucket {self.bucket!r} does not exist{where}") from None
            if code in ("InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied", "ExpiredToken", "403"):
                raise SourceError(
                    f"lake {self.root}: the credentials were refused{where} ({code}): check AWS_ACCESS_KEY_ID and "
                    f"AWS_SECRET_ACCESS_KEY (or the connection {ENV_PREFIX}LAKE_CONN_ID names)"
                ) from None
            raise SourceError(f"lake {self.root}: {code or 'error'}{where}: {e}") from None
        except BotoCoreError as e:
            raise SourceError(f"lake {self.root}: cannot reach the object store{where}: {e}") from None


def parse_store(text: str | os.PathLike[str], env: Mapping[str, str] | None = None) -> Store:
    """The store a lake root names: `s3://bucket/prefix` (or `s3a://`), `file:///dir`, or a local directory.

    Any other URI scheme is refused (never taken as a folder named `gs:`)."""
    raw = os.fspath(text)
    if not (match := _SCHEME.match(raw)):
        local = Path(raw).resolve()
        return Store(str(local), local=local)
    scheme = match[1].lower()
    parts = urlsplit(raw)
    if scheme == "file":
        local = Path(parts.path or "/").resolve()
        return Store(str(local), local=local)
    if scheme not in OBJECT_SCHEMES:
        raise InputError(
            f"lake {raw}: scheme {scheme!r} is not supported (a local directory, or s3://bucket/prefix on S3 or an "
            "S3-compatible store)"
        )
    prefix = parts.path.strip("/")
    if not parts.netloc or parts.query or parts.fragment or "//" in prefix:
        raise InputError(f"lake {raw}: expected s3://bucket/prefix")
    root = f"s3://{parts.netloc}/{prefix}".rstrip("/")
    return Store(root, bucket=parts.netloc, prefix=prefix, s3=S3Settings.from_env(env))
