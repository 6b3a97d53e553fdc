"""Security against Apache Kafka itself (issue 17 item 6): SCRAM-SHA-512 over TLS, mutual TLS and ACLs.

One broker for the module (`jobs.io.kafka_broker`) with two secured client listeners beside its PLAINTEXT one:
SECURE (SASL_SSL, SCRAM-SHA-512 only) and MTLS (SSL, client certificates required), both serving a certificate for
127.0.0.1 / localhost signed by a test CA made here. The StandardAuthorizer denies what no ACL allows; the PLAINTEXT
listeners (inter-broker, controller, this module's set-up) are ANONYMOUS, the one super user. SCRAM users are
created and ACLs granted through Kafka's admin API, one consumer group is live, and every case runs the real
`rebalance snapshot` process with its REBALANCE_KAFKA_* environment: it pulls the group, or exits 2 with one line
naming the cause. No password or key password reaches its output, the snapshot file, or the broker's files.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from classic_join import join_when_known

from jobs.io.kafka_broker import Broker, Listener, broker

ROOT = Path(__file__).resolve().parents[2]
TOPIC, GROUP, RECORDS = "secure-events", "secure-readers", 20
READER, OUTSIDER = "planner-reader", "planner-outsider"  # SCRAM users: one granted the pull's ACLs, one none
TLS_PRINCIPAL = "CN=rebalance-tls"  # the client certificate's subject: its principal on the MTLS listener
PASSWORDS = {READER: "scram-Rd7#never-printed", OUTSIDER: "scram-Ou4#never-printed"}
WRONG_PASSWORD = "scram-Wr0ng#never-printed"
KEY_PASSWORD = "tls-Kp2#never-printed"  # encrypts the client certificate's private key
SECRETS = (*PASSWORDS.values(), WRONG_PASSWORD, KEY_PASSWORD)
AUTHORIZER = {
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "super.users": "User:ANONYMOUS",  # the PLAINTEXT listeners only: SCRAM users and certificates are named
    "allow.everyone.if.no.acl.found": "false",
}

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


# -- a test CA, a server certificate for the loopback address, a client certificate ------------------------------


@dataclass(frozen=True)
class Pki:
    ca: Path  # the test CA's certificate (PEM): what clients and the MTLS listener trust
    server: Path  # the broker's PEM key store: its unencrypted PKCS#8 key, then its certificate chain
    client_cert: Path
    client_key: Path  # PKCS#8, encrypted with KEY_PASSWORD
    other_ca: Path  # a CA that signed nothing the broker serves


def make_pki(directory: Path) -> Pki:
    """EC P-256 keys, certificates valid for a day; the server's names are localhost and 127.0.0.1."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = dt.datetime.now(dt.UTC)

    def certificate(subject: str, key: Any, issuer: str, issuer_key: Any, *extensions: Any) -> x509.Certificate:
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
            .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, issuer)]))
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=1))
        )
        for extension in extensions:
            builder = builder.add_extension(extension, critical=isinstance(extension, x509.BasicConstraints))
        return builder.sign(issuer_key, hashes.SHA256())

    def authority(name: str) -> tuple[x509.Certificate, Any]:
        key = ec.generate_private_key(ec.SECP256R1())
        return certificate(name, key, name, key, x509.BasicConstraints(ca=True, path_length=0)), key

    def pem(cert: x509.Certificate) -> bytes:
        return cert.public_bytes(serialization.Encoding.PEM)

    def pkcs8(key: Any, password: str | None = None) -> bytes:
        encryption: serialization.KeySerializationEncryption = (
            serialization.BestAvailableEncryption(password.encode()) if password else serialization.NoEncryption()
        )
        return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption)

    ca_cert, ca_key = authority("rebalance test CA")
    other_cert, _ = authority("rebalance other CA")
    server_key, client_key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    names = x509.SubjectAlternativeName([x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))])
    server_cert = certificate(
        "localhost",
        server_key,
        "rebalance test CA",
        ca_key,
        names,
        x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]),
    )
    client_cert = certificate(
        TLS_PRINCIPAL.removeprefix("CN="),
        client_key,
        "rebalance test CA",
        ca_key,
        x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]),
    )
    pki = Pki(*(directory / n for n in ("ca.pem", "server.pem", "client.pem", "client.key", "other-ca.pem")))
    pki.ca.write_bytes(pem(ca_cert))
    pki.server.write_bytes(pkcs8(server_key) + pem(server_cert) + pem(ca_cert))
    pki.client_cert.write_bytes(pem(client_cert))
    pki.client_key.write_bytes(pkcs8(client_key, KEY_PASSWORD))
    pki.other_ca.write_bytes(pem(other_cert))
    return pki


# -- one secured broker, its users and ACLs, one live group ------------------------------------------------------


@dataclass(frozen=True)
class Secured:
    kafka: Broker
    pki: Pki

    @property
    def secure(self) -> str:
        return self.kafka.listeners["SECURE"]

    @property
    def mtls(self) -> str:
        return self.kafka.listeners["MTLS"]


def secured_listeners(pki: Pki) -> list[Listener]:
    """SASL_SSL with SCRAM-SHA-512 alone (the broker side of SCRAM needs the login module, without credentials),
    and SSL requiring a client certificate signed by the test CA; both keep their keys in PEM files."""
    tls = {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(pki.server)}
    scram = {
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "scram-sha-512.sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required;",
    }
    mtls = {"ssl.client.auth": "required", "ssl.truststore.type": "PEM", "ssl.truststore.location": str(pki.ca)}
    return [Listener("SECURE", "SASL_SSL", {**tls, **scram}), Listener("MTLS", "SSL", {**tls, **mtls})]


def grant(bootstrap: str) -> None:
    """SCRAM-SHA-512 credentials for both users; for the reader and the certificate's principal, Describe on the
    `secure-` groups and topics (all a pull needs: ListGroups, FindCoordinator, DescribeGroups and OffsetFetch on
    the group, Metadata and ListOffsets on its topic); nothing for the outsider."""
    from kafka import KafkaAdminClient
    from kafka.admin import (
        ACL,
        ACLOperation,
        ACLPermissionType,
        ACLResourcePatternType,
        ResourcePattern,
        ResourceType,
        UserScramCredentialUpsertion,
    )

    admin = KafkaAdminClient(bootstrap_servers=[bootstrap], client_id="security-setup")
    try:
        users = [UserScramCredentialUpsertion(user, "SCRAM-SHA-512", pw) for user, pw in PASSWORDS.items()]
        assert admin.alter_user_scram_credentials(users) == dict.fromkeys(PASSWORDS)
        prefixed = ACLResourcePatternType.PREFIXED
        acls = [
            ACL(
                f"User:{principal}",
                "*",
                ACLOperation.DESCRIBE,
                ACLPermissionType.ALLOW,
                ResourcePattern(resource, "secure-", prefixed),
            )
            for principal in (READER, TLS_PRINCIPAL)
            for resource in (ResourceType.GROUP, ResourceType.TOPIC)
        ]
        created = admin.create_acls(acls)
        assert not created["failed"], created["failed"]
    finally:
        admin.close()


def create_topic(bootstrap: str) -> None:
    """TOPIC with two partitions and RECORDS keyed records."""
    from kafka import KafkaAdminClient, KafkaProducer
    from kafka.admin import NewTopic

    admin = KafkaAdminClient(bootstrap_servers=[bootstrap], client_id="security-setup")
    try:
        admin.create_topics([NewTopic(TOPIC, 2, 1)])
        admin.wait_for_topics([TOPIC], timeout_ms=30_000)
    finally:
        admin.close()
    producer = KafkaProducer(bootstrap_servers=[bootstrap], client_id="security-producer", acks=1)
    try:
        for i in range(RECORDS):
            producer.send(TOPIC, key=f"key-{i}".encode(), value=b"value")
        producer.flush(timeout=30)
    finally:
        producer.close(timeout=10)


def member(bootstrap: str, ready: threading.Event, stop: threading.Event, errors: list[BaseException]) -> None:
    """GROUP's one member (over PLAINTEXT): reads every record, commits once, then stays until `stop`. It joins as
    `classic_join` does (a round assigned before its metadata held the new topic gave it nothing in CI)."""
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(
        bootstrap_servers=[bootstrap],
        group_id=GROUP,
        client_id="secure-reader-0",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    read = 0
    try:
        read = join_when_known(consumer, TOPIC)
        while not stop.is_set():
            read += sum(len(records) for records in consumer.poll(timeout_ms=200).values())
            if read >= RECORDS and not ready.is_set():
                consumer.commit()
                ready.set()
    except Exception as exc:  # handed to the fixture rather than lost with the thread
        errors.append(exc)
    finally:
        consumer.close(autocommit=False)


def wait_until_granted(secure: str, ca: Path, timeout_s: float = 60.0) -> None:
    """Until the product's own pull sees GROUP as the reader and authenticates the outsider: credentials and ACLs
    reach the broker's caches from the metadata log a moment after the admin calls return."""
    from jobs.io.kafka_settings import KafkaSettings
    from jobs.io.kafka_source import KafkaSourceError, pull_snapshots

    def settings(user: str) -> KafkaSettings:
        return KafkaSettings(
            secure,
            security_protocol="SASL_SSL",
            sasl_mechanism="SCRAM-SHA-512",
            sasl_username=user,
            sasl_password=PASSWORDS[user],
            ssl_cafile=str(ca),
            connect_timeout_ms=2_000,
            request_timeout_ms=5_000,
        )

    deadline, last = time.monotonic() + timeout_s, "nothing yet"
    while time.monotonic() < deadline:
        try:
            if [g["group_id"] for g in pull_snapshots(settings(READER))] == [GROUP]:
                pull_snapshots(settings(OUTSIDER))
                return
        except KafkaSourceError as exc:
            last = str(exc)
        time.sleep(0.2)
    raise AssertionError(f"the users were not granted within {timeout_s:.0f}s: {last}")


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    pki = make_pki(tmp_path_factory.mktemp("pki"))
    with broker(listeners=secured_listeners(pki), overrides=AUTHORIZER) as kafka:
        grant(kafka.bootstrap)
        create_topic(kafka.bootstrap)
        ready, stop, errors = threading.Event(), threading.Event(), []
        thread = threading.Thread(target=member, args=(kafka.bootstrap, ready, stop, errors), daemon=True)
        thread.start()
        try:
            assert ready.wait(90), f"{GROUP} did not read and commit its records: {errors!r}"
            wait_until_granted(kafka.listeners["SECURE"], pki.ca)
            yield Secured(kafka, pki)
        finally:
            stop.set()
            thread.join(timeout=30)
        assert not errors, errors


# -- the real CLI ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Run:
    done: subprocess.CompletedProcess[str]
    output: Path


def snapshot(tmp_path: Path, *args: str, **kafka: str) -> Run:
    """`rebalance snapshot --output FILE ARGS` as its own process with REBALANCE_KAFKA_<NAME> = `kafka`; asserts
    that no secret reaches its stdout, stderr or the snapshot file."""
    output = tmp_path / "snapshot.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("REBALANCE_") and k != "JAVA_HOME"}
    env |= {"PYTHONPATH": str(ROOT), "REBALANCE_KAFKA_CONNECT_TIMEOUT_MS": "3000"}
    env |= {
        "REBALANCE_KAFKA_REQUEST_TIMEOUT_MS": "5000",
        **{f"REBALANCE_KAFKA_{k.upper()}": v for k, v in kafka.items()},
    }
    done = subprocess.run(
        [sys.executable, "-m", "jobs.cli", "snapshot", "--output", str(output), *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    written = output.read_bytes() if output.exists() else b""
    for secret in SECRETS:
        assert secret not in done.stdout + done.stderr, f"a secret reached the output of {args}, {kafka.keys()}"
        assert secret.encode() not in written, f"a secret reached {output}"
    return Run(done, output)


def one_error_line(run: Run) -> str:
    """Exit 2 with one line naming the cause (no traceback), and no snapshot file."""
    done = run.done
    assert done.returncode == 2, done.stderr[-3000:]
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("rebalance snapshot: error: "), done.stderr[-3000:]
    assert not run.output.exists()
    return lines[0]


def scram(secured: Secured, user: str, password: str, mechanism: str = "SCRAM-SHA-512") -> dict[str, str]:
    return {
        "bootstrap_servers": secured.secure,
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": mechanism,
        "sasl_username": user,
        "sasl_password": password,
        "ssl_cafile": str(secured.pki.ca),
    }


def mtls(secured: Secured) -> dict[str, str]:
    return {
        "bootstrap_servers": secured.mtls,
        "security_protocol": "SSL",
        "ssl_cafile": str(secured.pki.ca),
        "ssl_certfile": str(secured.pki.client_cert),
        "ssl_keyfile": str(secured.pki.client_key),
        "ssl_key_password": KEY_PASSWORD,
    }


def assert_pulled(run: Run) -> None:
    """The one live group, whole: its member, its topic's partitions, every record committed."""
    assert run.done.returncode == 0, run.done.stderr[-3000:]
    assert run.done.stdout == f"1 group snapshots -> {run.output}\n"
    (group,) = json.loads(run.output.read_text())
    assert (group["group_id"], group["state"], group["topics"]) == (GROUP, "Stable", {TOPIC: 2})
    assert [m["client_id"] for m in group["members"]] == ["secure-reader-0"]
    assert sorted(tp for m in group["members"] for tp in map(tuple, m["assignment"])) == [(TOPIC, 0), (TOPIC, 1)]
    assert all(o["committed"] == o["end"] for o in group["offsets"]), group["offsets"]
    assert sum(o["end"] for o in group["offsets"]) == RECORDS


# -- the cases ---------------------------------------------------------------------------------------------------


def test_scram_sha_512_over_tls_pulls_the_group(secured: Secured, tmp_path: Path) -> None:
    assert_pulled(snapshot(tmp_path, **scram(secured, READER, PASSWORDS[READER])))


def test_a_client_certificate_with_an_encrypted_key_pulls_the_group(secured: Secured, tmp_path: Path) -> None:
    assert_pulled(snapshot(tmp_path, **mtls(secured)))


def test_a_wrong_password_is_named_as_an_authentication_failure(secured: Secured, tmp_path: Path) -> None:
    line = one_error_line(snapshot(tmp_path, **scram(secured, READER, WRONG_PASSWORD)))
    assert line == (
        f"rebalance snapshot: error: Kafka at {secured.secure} refused authentication of user '{READER}' "
        "(SCRAM-SHA-512 over SASL_SSL): Authentication failed during authentication due to invalid credentials "
        "with SASL mechanism SCRAM-SHA-512"
    )


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "PLAIN"])
def test_a_mechanism_the_listener_does_not_enable_is_named(secured: Secured, tmp_path: Path, mechanism: str) -> None:
    line = one_error_line(snapshot(tmp_path, **scram(secured, READER, PASSWORDS[READER], mechanism)))
    assert line == f"rebalance snapshot: error: Kafka at {secured.secure} does not offer SASL mechanism {mechanism}"


@pytest.mark.parametrize("trusted", ["system", "other"])
def test_a_certificate_the_client_does_not_trust_is_named(secured: Secured, tmp_path: Path, trusted: str) -> None:
    """Without the test CA: the system's CA certificates, or another CA's."""
    env = scram(secured, READER, PASSWORDS[READER])
    env["ssl_cafile"] = str(secured.pki.other_ca) if trusted == "other" else ""
    trusting = secured.pki.other_ca if trusted == "other" else "the system's default CA certificates"
    line = one_error_line(snapshot(tmp_path, **env))
    assert line == (
        f"rebalance snapshot: error: Kafka at {secured.secure}: TLS certificate verification failed over SASL_SSL: "
        f"self-signed certificate in certificate chain (trusting {trusting})"
    )


def test_a_user_without_acls_is_named_as_not_authorized(secured: Secured, tmp_path: Path) -> None:
    """Kafka lists only the groups a principal may describe, so the outsider's pull names the group it asked for:
    describing it is what the broker refuses."""
    run = snapshot(tmp_path, "--group", GROUP, **scram(secured, OUTSIDER, PASSWORDS[OUTSIDER]))
    assert one_error_line(run) == (
        f"rebalance snapshot: error: pulling consumer groups: Kafka at {secured.secure} did not authorize "
        f"user '{OUTSIDER}' to describe group '{GROUP}' (GroupAuthorizationFailedError)"
    )


def test_no_secret_reaches_the_outputs_or_the_broker_files(secured: Secured, tmp_path: Path) -> None:
    """`snapshot` checks each run's stdout, stderr and file; here every secret is used, then the broker's own files
    (configuration, log, metadata log with the SCRAM credentials) are read for them too."""
    runs = [
        snapshot(tmp_path / "scram", **scram(secured, READER, PASSWORDS[READER])),
        snapshot(tmp_path / "wrong", **scram(secured, READER, WRONG_PASSWORD)),
        snapshot(tmp_path / "outsider", "--group", GROUP, **scram(secured, OUTSIDER, PASSWORDS[OUTSIDER])),
        snapshot(tmp_path / "mtls", **mtls(secured)),
    ]
    assert [r.done.returncode for r in runs] == [0, 2, 2, 0]
    broker_files = [p for p in Path(secured.kafka.data_dir).rglob("*") if p.is_file()]
    names = {p.name for p in broker_files}
    assert {"server.properties", "broker.log"} <= names, names
    assert any(p.parent.name == "__cluster_metadata-0" and p.suffix == ".log" for p in broker_files), names
    for path in [*broker_files, *(p for p in secured.pki.ca.parent.iterdir() if p.is_file())]:
        content = path.read_bytes()
        for secret in SECRETS:
            assert secret.encode() not in content, f"a secret is in {path}"
