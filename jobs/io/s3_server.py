"""An S3-compatible server on 127.0.0.1 for the tests and the benches: moto's server mode (a dev dependency).

It serves S3 with its conditional writes (`If-None-Match`, `If-Match`), which Delta commits and the lake's leases
rely on, and checks request signatures once `require_auth` is on: keys made by `user` work, any other is refused.
Started as a child process, stopped by its PID.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jobs.io.loopback import LOOPBACK, free_port

REGION = "us-east-1"
ALLOW_ALL = json.dumps({"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]})


@dataclass
class S3Server:
    """A running server: its endpoint, process, and the keys of the user made at start."""

    endpoint: str
    process: subprocess.Popen[bytes]
    access_key: str = ""
    secret_key: str = ""

    def client(self, access_key: str | None = None, secret_key: str | None = None) -> Any:
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            region_name=REGION,
            aws_access_key_id=access_key or self.access_key or "anonymous",
            aws_secret_access_key=secret_key or self.secret_key or "anonymous",
        )

    def bucket(self, prefix: str = "lake") -> str:
        """A new empty bucket (a fresh name: Spark's S3A caches one file system per bucket and process)."""
        name = f"{prefix}-{uuid.uuid4().hex[:12]}"
        self.client().create_bucket(Bucket=name)
        return name

    def env(self, access_key: str | None = None, secret_key: str | None = None) -> dict[str, str]:
        """The AWS variables that point a process (the `rebalance` CLI, Spark) at this server."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_REGION": REGION,
            "AWS_ACCESS_KEY_ID": access_key or self.access_key,
            "AWS_SECRET_ACCESS_KEY": secret_key or self.secret_key,
        }


@contextmanager
def s3_server(logs: Path, *, require_auth: bool = True) -> Iterator[S3Server]:
    """Start the server, make a user with an access key allowed everything, then (by default) require signed
    requests from known keys; stop it by its PID on exit."""
    port = free_port()
    logs.mkdir(parents=True, exist_ok=True)
    with open(logs / "moto.log", "ab") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", LOOPBACK, "-p", str(port)],
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, "MOTO_CALL_RESET_API": "false"},
        )
    server = S3Server(f"http://{LOOPBACK}:{port}", process)
    try:
        _wait_until_up(server)
        import boto3

        iam = boto3.client(
            "iam", endpoint_url=server.endpoint, region_name=REGION, aws_access_key_id="x", aws_secret_access_key="x"
        )
        iam.create_user(UserName="planner")
        iam.put_user_policy(UserName="planner", PolicyName="lake", PolicyDocument=ALLOW_ALL)
        key = iam.create_access_key(UserName="planner")["AccessKey"]
        server.access_key, server.secret_key = key["AccessKeyId"], key["SecretAccessKey"]
        if require_auth:
            url = f"{server.endpoint}/moto-api/reset-auth"
            request = urllib.request.Request(url, data=b"0", method="POST", headers={"Content-Type": "text/plain"})
            urllib.request.urlopen(request, timeout=10).close()
        yield server
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _wait_until_up(server: S3Server, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            urllib.request.urlopen(f"{server.endpoint}/moto-api/", timeout=2).close()
            return
        except OSError:
            if server.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the S3 server at {server.endpoint} did not start") from None
            time.sleep(0.1)
