"""Live Kafka source: consumer-group snapshots in the snapshot-file contract, and key samples for `key_samples`.

`pull_snapshots` reads every matching group's state, members, decoded subscriptions and assignments, the
partition counts of the topics they use, and committed and end offsets; it returns all of it or raises (a
snapshot is all or nothing). `sample_keys` reads the last records of chosen topics without joining a group and
without committing. Failures are `KafkaSourceError`s that name the cause and never carry a secret.
"""

from __future__ import annotations

import base64
import contextlib
import json
import logging
import os
import re
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

import pyarrow as pa

from jobs.io import kip848_source
from jobs.io.kafka_settings import KafkaSettings
from planner.errors import LimitError, SourceError
from schemas.rules import Limits, limit_errors
from schemas.tables import KEY_SAMPLES

log = logging.getLogger(__name__)

REBALANCING = ("PreparingRebalance", "CompletingRebalance", "Assigning", "Reconciling")
CONSUMER_PROTOCOL = "consumer"
# kafka-python's text when the broker's SASL handshake lists mechanisms without the one asked for.
OFFERED_MECHANISMS = re.compile(r"Enabled mechanisms: \[([^\]]*)\]")
QUOTED = re.compile(r"'([^']*)'")
# kafka-python's text for a failed TLS handshake: "Handshake failed: [SSL: CODE] reason (_ssl.c:NNN)".
TLS_HANDSHAKE = re.compile(r"Handshake failed: (?:\[SSL: (?P<code>\w+)\] )?(?P<reason>.*?)(?: \(_ssl\.c:\d+\))?$")
# kafka-python's "SaslAuthenticationFailedError: " before the broker's own text of a failed authentication.
ERROR_PREFIX = re.compile(r"^(?:\w+Error: )+")
# What a principal was not authorized to do, by the broker's error (Kafka ACL operations on resources).
UNAUTHORIZED_TO = {
    "GroupAuthorizationFailedError": "describe group(s)",
    "TopicAuthorizationFailedError": "describe topic(s)",
    "ClusterAuthorizationFailedError": "act on the cluster",
}
GLOB_CHARACTERS = frozenset("*?[")
_DELIVERING_BEFORE_CLOSE: set[type] = set()


class KafkaSourceError(SourceError):
    """Pulling from Kafka failed; nothing was returned or written."""


class BrokerUnreachableError(KafkaSourceError):
    """No broker answered at the bootstrap servers within the connect timeout."""


class UnknownTopicError(KafkaSourceError):
    """A requested topic does not exist."""


class UnknownGroupError(KafkaSourceError):
    """No consumer group matches the requested pattern."""


def pull_snapshots(
    settings: KafkaSettings,
    *,
    group_pattern: str = "*",
    include_empty: bool | None = None,
    rebalance_budget_s: float = 10.0,
    captured_at: datetime | None = None,
) -> list[dict[str, Any]]:
    """Snapshot documents (schemas/snapshot.schema.json) of the consumer groups matching a glob pattern.

    With the default pattern '*' only groups that have members are returned; with any other pattern empty and
    dead groups are recorded too (`include_empty` overrides both). A group caught mid-rebalance is described
    again until it is stable or `rebalance_budget_s` runs out, then recorded with its state.
    """
    captured = (captured_at or datetime.now(UTC)).astimezone(UTC)
    keep_empty = group_pattern != "*" if include_empty is None else include_empty
    with _admin(settings) as admin, _translated(settings, "pulling consumer groups"):
        listed = _retried(admin.list_groups)
        matched = sorted(
            {
                g["group_id"]
                for g in listed
                if g.get("protocol_type") in (CONSUMER_PROTOCOL, "") and fnmatchcase(g["group_id"], group_pattern)
            }
        )
        if not matched and group_pattern != "*":
            _refuse_if_hidden(admin, settings, group_pattern)
            raise UnknownGroupError(
                f"no consumer group matches {group_pattern!r} (the cluster has {len(listed)} groups)"
            )
        # KIP-848 consumer groups (ListGroups v5 GroupType) go to ConsumerGroupDescribe, the classic ones here.
        consumer = kip848_source.consumer_group_ids(listed, matched)
        described = _describe_settled(admin, [g for g in matched if g not in consumer], rebalance_budget_s)
        consumer_groups = kip848_source.describe_consumer_groups(admin, sorted(consumer))
        if any(m.get("topic_regex") for g in consumer_groups.values() for m in g.members):
            kip848_source.resolve_patterns(consumer_groups, _user_topics(admin))
        described.update(consumer_groups)
        groups = [
            described[g]
            for g in matched
            if keep_empty or described[g].members or kip848_source.is_unknown(described[g])
        ]
        if not groups:
            return []
        committed = admin.list_group_offsets({g.group_id: None for g in groups})
        members = {
            g.group_id: list(g.members) if g.group_id in consumer else [_member_document(m, g) for m in g.members]
            for g in groups
        }
        wanted = {t for ms in members.values() for m in ms for t in m["topics"]}
        wanted |= {tp.topic for offsets in committed.values() for tp in offsets}
        ids: dict[str, str] = {}
        counts = _partition_counts(admin, sorted(wanted), missing_ok=True, ids=ids)
        limits = Limits.from_env()
        for g in groups:  # the one rule set's ceilings, before offsets of every partition are fetched
            topics = {t: counts[t] for m in members[g.group_id] for t in m["topics"] if t in counts}
            if over := limit_errors({"topics": topics, "members": members[g.group_id]}, limits):
                raise LimitError(f"group {g.group_id!r}: {'; '.join(over)}")
        ends = _end_offsets(admin, counts)
    return [
        _group_document(g, members[g.group_id], counts, committed[g.group_id], ends, captured, ids)
        | kip848_source.group_fields(g)
        for g in groups
    ]


def sample_keys(
    settings: KafkaSettings,
    topics: Sequence[str],
    records_per_partition: int,
    *,
    max_records: int | None = None,
    timeout_s: float = 60.0,
    key_fraction: float | None = None,
    key_seed: int = 0,
    sample_id: str | None = None,
) -> pa.Table:
    """`key_samples` rows for the last `records_per_partition` records of every partition of `topics`.

    Reads without a consumer group and commits nothing. Stops early at `max_records` kept rows; a partition not
    read to its end offset within `timeout_s` (the broker gone or too slow) raises `KafkaSourceError`. With
    `key_fraction`, keeps only records whose key's unsigned mmh3 hash (seed `key_seed`) falls below that fraction
    of 2**32, so nightly samples keep the same keys and stay comparable (null keys dropped).
    """
    if records_per_partition <= 0:
        raise ValueError(f"records_per_partition must be positive, got {records_per_partition}")
    if key_fraction is not None and not 0.0 < key_fraction <= 1.0:
        raise ValueError(f"key_fraction must be in (0, 1], got {key_fraction}")
    sample_id = sample_id or f"kafka-{datetime.now(UTC):%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:8]}"
    with _admin(settings) as admin, _translated(settings, "sampling keys"):
        counts = _partition_counts(admin, list(dict.fromkeys(topics)), missing_ok=False)
    rows = _read_tail(settings, counts, records_per_partition, max_records, timeout_s, key_fraction, key_seed)
    return _samples_table(sample_id, rows)


def write_snapshots(documents: Sequence[dict[str, Any]], path: str | os.PathLike[str]) -> None:
    """Write documents as a JSON array (JSON lines for *.jsonl), atomically: the file appears whole or not at all."""
    target = Path(path)
    if target.suffix == ".jsonl":
        text = "".join(json.dumps(d, sort_keys=True) + "\n" for d in documents)
    else:
        text = json.dumps(list(documents), indent=1, sort_keys=True) + "\n"
    _atomic_write(target, text.encode("utf-8"))


def write_key_samples(table: pa.Table, path: str | os.PathLike[str]) -> None:
    """Write key samples as one Parquet file, atomically."""
    import pyarrow.parquet as pq

    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    _atomic_write(Path(path), sink.getvalue().to_pybytes())


def _atomic_write(target: Path, data: bytes) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


# -- connection and errors ---------------------------------------------------------------------------------------


@contextlib.contextmanager
def _admin(settings: KafkaSettings) -> Iterator[Any]:
    from kafka import KafkaAdminClient

    _deliver_bytes_read_before_close()
    with _translated(settings, "connecting"), _bootstrap_failures() as failures:
        try:
            admin = KafkaAdminClient(**settings.client_config())
        except Exception:
            if failures:  # bootstrap retries auth failures until its timeout; report the real cause
                raise KafkaSourceError(_refusal(settings, failures[0])) from None
            raise
    try:
        yield admin
    finally:
        admin.close()


@contextlib.contextmanager
def _bootstrap_failures() -> Iterator[list[BaseException]]:
    """Collect authentication / TLS failures that kafka-python only logs while it retries bootstrap."""
    from kafka.errors import (
        AuthorizationError,
        KafkaConnectionError,
        SaslAuthenticationFailedError,
        UnsupportedSaslMechanismError,
    )

    seen: list[BaseException] = []

    class _Collector(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            for arg in record.args if isinstance(record.args, tuple) else ():
                refused = SaslAuthenticationFailedError | AuthorizationError | UnsupportedSaslMechanismError
                if isinstance(arg, refused) or (
                    isinstance(arg, KafkaConnectionError) and "Handshake failed" in str(arg)
                ):
                    seen.append(arg)

    handler = _Collector(logging.WARNING)
    logger = logging.getLogger("kafka.net.manager")
    logger.addHandler(handler)
    try:
        yield seen
    finally:
        logger.removeHandler(handler)


def _deliver_bytes_read_before_close() -> None:
    """Apache Kafka answers a refused SASL handshake or failed authentication, then closes the connection at once.

    kafka-python 3.0.12's transports lose that answer whenever it arrives with the close: `_sock_recv` returns
    the bytes together with 'socket disconnected', and `_read_from_sock` aborts without handing them over, so the
    client sees a lost connection (then "no broker answered") instead of the broker's reason. Hand such bytes
    over and let the next read meet the close again. Errors raised by the socket itself are left as they are.
    """
    from kafka.net import transport

    for cls in (transport.KafkaTCPTransport, transport.KafkaSSLTransport):
        recv = cls.__dict__.get("_sock_recv")
        if recv is None or cls in _DELIVERING_BEFORE_CLOSE:
            continue

        def _sock_recv(self: Any, _recv: Any = recv) -> tuple[bytes, BaseException | None]:
            data, err = _recv(self)
            if data and err is not None and not any(isinstance(a, BaseException) for a in err.args):
                return data, None  # the peer closed after these bytes: the next read sees the close
            return data, err

        cls._sock_recv = _sock_recv
        _DELIVERING_BEFORE_CLOSE.add(cls)


def _refusal(settings: KafkaSettings, exc: BaseException) -> str:
    """Why the brokers refused the connection: a SASL mechanism they do not offer (with those they do, when the
    client learnt them), rejected credentials (the broker's reason), a failed TLS handshake (why), a permission
    the principal lacks; else the failure's type. Never a credential."""
    from kafka.errors import (
        AuthorizationError,
        KafkaConnectionError,
        SaslAuthenticationFailedError,
        UnsupportedSaslMechanismError,
    )

    where = f"Kafka at {settings.bootstrap_servers}"
    protocol = settings.security_protocol
    if isinstance(exc, SaslAuthenticationFailedError):
        return (
            f"{where} refused authentication of user {settings.sasl_username!r} "
            f"({settings.sasl_mechanism} over {protocol}): {_broker_reason(settings, exc)}"
        )
    if isinstance(exc, AuthorizationError):
        return _unauthorized(settings, exc)
    if isinstance(exc, KafkaConnectionError) and (tls := TLS_HANDSHAKE.search(str(exc))):
        reason = tls["reason"]
        if tls["code"] != "CERTIFICATE_VERIFY_FAILED":
            return f"{where}: TLS handshake failed over {protocol}: {reason}"
        trusting = settings.ssl_cafile or "the system's default CA certificates"
        reason = reason.removeprefix("certificate verify failed: ")
        return f"{where}: TLS certificate verification failed over {protocol}: {reason} (trusting {trusting})"
    if not isinstance(exc, UnsupportedSaslMechanismError):
        return f"{where} refused the connection: {type(exc).__name__} ({protocol})"
    refused = f"{where} does not offer SASL mechanism {settings.sasl_mechanism}"
    offered = OFFERED_MECHANISMS.search(str(exc))
    if offered is None:  # the broker refused the handshake itself, without a list
        return refused
    return f"{refused}; it offers: {', '.join(QUOTED.findall(offered[1]))}"


def _broker_reason(settings: KafkaSettings, exc: BaseException) -> str:
    """The broker's own text of a failed SASL authentication (Kafka names no credential in it; masked anyway)."""
    text = exc.args[0] if exc.args and isinstance(exc.args[0], str) else ""
    text = ERROR_PREFIX.sub("", text).strip()
    for secret in (settings.sasl_password, settings.ssl_key_password):
        if secret:
            text = text.replace(secret, "***")
    return text or type(exc).__name__


def _unauthorized(settings: KafkaSettings, exc: BaseException, to: str | None = None) -> str:
    """A permission the principal lacks (no ACL allows it): who, to do what, and the broker's error."""
    if settings.security_protocol.startswith("SASL_"):
        principal = f"user {settings.sasl_username!r}"
    elif settings.ssl_certfile:
        principal = "the client certificate's principal"
    else:
        principal = "this client"
    name = type(exc).__name__
    return (
        f"Kafka at {settings.bootstrap_servers} did not authorize {principal} "
        f"to {to or UNAUTHORIZED_TO.get(name, 'do this')} ({name})"
    )


def _refuse_if_hidden(admin: Any, settings: KafkaSettings, group_id: str) -> None:
    """ListGroups leaves out the groups the principal may not describe, so a group id that lists nothing may be
    hidden rather than absent: describing it tells which (FindCoordinator refuses an unauthorized group)."""
    from kafka.errors import GroupAuthorizationFailedError, KafkaError

    if GLOB_CHARACTERS & set(group_id):
        return
    try:
        admin.describe_groups([group_id])
    except GroupAuthorizationFailedError as exc:
        refused = _unauthorized(settings, exc, f"describe group {group_id!r}")
        raise KafkaSourceError(f"pulling consumer groups: {refused}") from None
    except KafkaError:
        return  # nothing more to learn here: the group is reported as not found


@contextlib.contextmanager
def _translated(settings: KafkaSettings, action: str) -> Iterator[None]:
    """Turn kafka-python errors into KafkaSourceErrors that name the cause (and never a credential)."""
    from kafka import errors as ke

    where = f"Kafka at {settings.bootstrap_servers}"
    try:
        yield
    except KafkaSourceError:
        raise
    except ke.UnsupportedSaslMechanismError as exc:
        raise KafkaSourceError(f"{action}: {_refusal(settings, exc)}") from None
    except (ke.SaslAuthenticationFailedError, ke.AuthorizationError) as exc:
        raise KafkaSourceError(f"{action}: {_refusal(settings, exc)}") from None
    except ke.UnknownTopicOrPartitionError as exc:
        raise UnknownTopicError(f"{action}: unknown topic or partition at {where}: {exc}") from exc
    except ke.GroupIdNotFoundError as exc:
        raise UnknownGroupError(f"{action}: unknown group at {where}: {exc}") from exc
    except (ke.NodeNotReadyError, ke.KafkaConnectionError) as exc:
        raise BrokerUnreachableError(f"{action}: cannot reach {where}: {exc}") from exc
    except ke.KafkaTimeoutError as exc:
        if "bootstrap" in str(exc):
            raise BrokerUnreachableError(
                f"{action}: no broker answered at {settings.bootstrap_servers} within {settings.connect_timeout_ms} ms"
            ) from exc
        raise KafkaSourceError(f"{action}: {where} timed out: {exc}") from exc
    except ke.RequestTimedOutError as exc:
        raise KafkaSourceError(f"{action}: {where} timed out after {settings.request_timeout_ms} ms") from exc
    except ke.KafkaError as exc:
        raise KafkaSourceError(f"{action}: {where} answered {type(exc).__name__}: {exc}") from exc


# -- groups -----------------------------------------------------------------------------------------------------


def _describe_raw(admin: Any, group_ids: Sequence[str]) -> dict[str, Any]:
    """DescribeGroups with member metadata and assignment left as raw bytes.

    kafka-python's public describe_groups decodes them with its own v0-only codec, which drops owned
    partitions, generation and rack; `planner.protocol` decodes every version, so this asks the coordinator
    directly (private helpers of the pinned kafka-python 3.0.12).
    """
    from kafka.errors import for_code
    from kafka.protocol.admin import DescribeGroupsRequest

    async def describe() -> dict[str, Any]:
        by_coordinator: dict[int, list[str]] = {}
        for group_id, node in (await admin._find_coordinator_ids(list(group_ids))).items():
            by_coordinator.setdefault(node, []).append(group_id)
        out = {}
        for node, ids in by_coordinator.items():
            response = await admin._manager.send(DescribeGroupsRequest(groups=ids), node_id=node)
            for group in response.groups:
                if group.error_code:
                    raise for_code(group.error_code)(f"DescribeGroups {group.group_id!r}")
                out[group.group_id] = group
        return out

    return admin._manager.run(describe) if group_ids else {}


def _describe_settled(admin: Any, group_ids: Sequence[str], budget_s: float) -> dict[str, Any]:
    described = _describe_raw(admin, group_ids)
    deadline = time.monotonic() + budget_s
    while unstable := [g for g, d in described.items() if d.group_state in REBALANCING]:
        if time.monotonic() >= deadline:
            log.warning("groups still rebalancing after %.1fs, recorded as such: %s", budget_s, unstable)
            break
        time.sleep(min(0.25, max(0.0, deadline - time.monotonic())))
        described.update(_describe_raw(admin, unstable))
    return described


def _member_document(member: Any, group: Any) -> dict[str, Any]:
    from planner import protocol

    protocol_name = group.protocol_data or None
    doc: dict[str, Any] = {
        "member_id": member.member_id,
        "client_id": member.client_id,
        "host": member.client_host,
        "group_instance_id": member.group_instance_id,
        "rack": None,
        "strategies": [protocol_name] if protocol_name else [],
        "topics": [],
        "owned": [],
        "assignment": [],
        "generation": None,
    }
    if group.protocol_type != CONSUMER_PROTOCOL:
        return doc | _raw("metadata_raw", member.member_metadata) | _raw("assignment_raw", member.member_assignment)
    try:
        sub = protocol.decode_subscription(member.member_metadata)
        owned, generation = _ownership(protocol_name, sub)
        doc.update(topics=list(sub.topics), owned=owned, rack=sub.rack_id, generation=generation)
        doc |= _raw("subscription_user_data", sub.user_data)
    except ValueError as exc:  # protocol.ProtocolError: a custom wire format; keep the bytes, do not fail
        doc |= _raw("metadata_raw", member.member_metadata) | {"decode_error": str(exc)}
    if member.member_assignment:
        try:
            assignment = protocol.decode_assignment(member.member_assignment)
            doc["assignment"] = _flat(assignment.partitions)
            doc |= _raw("assignment_user_data", assignment.user_data)
        except ValueError as exc:
            doc |= _raw("assignment_raw", member.member_assignment) | {"decode_error": str(exc)}
    return doc


def _ownership(protocol_name: str | None, sub: Any) -> tuple[list[list[Any]], int | None]:
    """Owned partitions and generation as Kafka's AbstractStickyAssignor.memberData reads them (3.5+).

    Subscription v1+ fields win; otherwise sticky carries them in its user data (StickyAssignor
    deserializeTopicPartitionAssignment) and cooperative-sticky its generation (CooperativeStickyAssignor).
    """
    from planner import protocol

    owned = _flat(sub.owned_partitions)
    generation = sub.generation_id if sub.generation_id >= 0 else None
    with contextlib.suppress(ValueError):  # unreadable user data: Kafka ignores it too
        if protocol_name == "sticky" and sub.user_data and not owned:
            data = protocol.decode_sticky_user_data(sub.user_data)
            owned = _flat(data.previous_assignment)
            generation = data.generation if generation is None else generation
        elif protocol_name == "cooperative-sticky" and sub.user_data and generation is None:
            generation = protocol.decode_cooperative_user_data(sub.user_data)
    return owned, generation if generation is not None and generation >= 0 else None


def _flat(tps: Any) -> list[list[Any]]:
    return [[t, p] for t, ps in tps for p in ps]


def _raw(name: str, data: bytes | None) -> dict[str, str]:
    return {name: base64.b64encode(data).decode("ascii")} if data else {}


def _retried(call: Any, budget_s: float = 15.0) -> Any:
    """`call()`, again after a short pause while the broker answers a retriable error (a group coordinator still
    loading its partitions after a start: COORDINATOR_LOAD_IN_PROGRESS), as Kafka's admin client retries."""
    from kafka.errors import KafkaError

    deadline = time.monotonic() + budget_s
    while True:
        try:
            return call()
        except KafkaError as exc:
            if not exc.retriable or time.monotonic() > deadline:
                raise
        time.sleep(0.2)


def _user_topics(admin: Any) -> list[str]:
    """Every topic of the cluster but the internal ones (what a regex subscription can match)."""
    return [t["name"] for t in admin.describe_topics() if not t.get("is_internal")]


def _partition_counts(
    admin: Any, topics: Sequence[str], *, missing_ok: bool, ids: dict[str, str] | None = None
) -> dict[str, int]:
    """Partition count of each topic (Metadata); with `ids`, also fills in each topic's Kafka id (base64url)."""
    from kafka.errors import UnknownTopicOrPartitionError, for_code

    if not topics:
        return {}
    counts = {}
    for t in admin.describe_topics(list(topics)):
        error = for_code(t["error_code"])
        if error is UnknownTopicOrPartitionError and missing_ok:
            continue  # a subscription to a topic that does not exist (yet): Kafka's assignors skip it too
        if error is not for_code(0):
            raise error(f"topic {t['name']!r}")
        counts[t["name"]] = len(t["partitions"])
        if ids is not None and (topic_id := _topic_id(t.get("topic_id"))):
            ids[t["name"]] = topic_id
    return counts


def _topic_id(raw: Any) -> str | None:
    """A topic id as Kafka prints it (Uuid.toString: base64url, no padding); None for none or the zero Uuid."""
    if raw is None:
        return None
    value = raw if isinstance(raw, uuid.UUID) else uuid.UUID(str(raw))
    return base64.urlsafe_b64encode(value.bytes).decode().rstrip("=") if value.int else None


def _end_offsets(admin: Any, counts: dict[str, int]) -> dict[tuple[str, int], int]:
    from kafka.admin import OffsetSpec
    from kafka.structs import TopicPartition

    specs = {TopicPartition(t, p): OffsetSpec.LATEST for t, n in counts.items() for p in range(n)}
    if not specs:
        return {}
    return {(tp.topic, tp.partition): o.offset for tp, o in admin.list_partition_offsets(specs).items()}


def _group_document(
    group: Any,
    members: list[dict[str, Any]],
    counts: dict[str, int],
    committed: dict[Any, Any],
    ends: dict[tuple[str, int], int],
    captured: datetime,
    ids: dict[str, str],
) -> dict[str, Any]:
    commits = {(tp.topic, tp.partition): om.offset for tp, om in committed.items() if om.offset >= 0}
    names = sorted({t for m in members for t in m["topics"]} | {t for t, _ in commits})
    topics = {t: counts[t] for t in names if t in counts}
    offsets = [
        {"topic": t, "partition": p, "committed": commits.get((t, p)), "end": ends[(t, p)]}
        for t in topics
        for p in range(topics[t])
    ]
    return {
        "group_id": group.group_id,
        "captured_at": captured.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        "source": "kafka",
        "state": group.group_state,
        "protocol_type": group.protocol_type or None,
        "protocol": group.protocol_data or None,
        "generation": None,  # classic DescribeGroups carries none
        "topics": topics,
        **({"topic_ids": {t: ids[t] for t in topics}} if all(t in ids for t in topics) else {}),
        "members": sorted(members, key=lambda m: m["member_id"]),
        "offsets": offsets,
    }


# -- key samples ------------------------------------------------------------------------------------------------


def _read_tail(
    settings: KafkaSettings,
    counts: dict[str, int],
    per_partition: int,
    max_records: int | None,
    timeout_s: float,
    key_fraction: float | None,
    key_seed: int,
) -> dict[str, list[Any]]:
    import mmh3
    from kafka import KafkaConsumer
    from kafka.structs import TopicPartition

    threshold = None if key_fraction is None else int(key_fraction * 2**32)
    rows: dict[str, list[Any]] = {
        "topic": [],
        "partition": [],
        "offset": [],
        "key": [],
        "value_size": [],
        "timestamp": [],
    }
    scanned: Counter[tuple[str, int]] = Counter()
    tps = [TopicPartition(t, p) for t, n in counts.items() for p in range(n)]
    reached: dict[Any, int] = {}  # per partition: the offset after the last record read
    with _translated(settings, "sampling keys"):
        consumer = KafkaConsumer(
            **settings.client_config(),
            group_id=None,
            enable_auto_commit=False,
            max_poll_records=10_000,
            fetch_max_wait_ms=100,
        )
    try:
        with _translated(settings, "sampling keys"):
            begin, end = consumer.beginning_offsets(tps), consumer.end_offsets(tps)
            consumer.assign(tps)
            todo = {tp for tp in tps if end[tp] > begin[tp]}
            for tp in tps:
                reached[tp] = max(begin[tp], end[tp] - per_partition)
                consumer.seek(tp, reached[tp])
            consumer.pause(*(set(tps) - todo))
            deadline = time.monotonic() + timeout_s
            while todo and time.monotonic() < deadline and (max_records is None or len(rows["key"]) < max_records):
                for tp, records in consumer.poll(timeout_ms=200).items():
                    for r in records:
                        if r.offset >= end[tp]:
                            break  # arrived after the sample started
                        scanned[(r.topic, r.partition)] += 1
                        reached[tp] = r.offset + 1
                        if threshold is not None and (
                            r.key is None or mmh3.hash(r.key, key_seed, signed=False) >= threshold
                        ):
                            continue
                        rows["topic"].append(r.topic)
                        rows["partition"].append(r.partition)
                        rows["offset"].append(r.offset)
                        rows["key"].append(r.key)
                        rows["value_size"].append(max(r.serialized_value_size, 0))
                        rows["timestamp"].append(r.timestamp * 1000 if r.timestamp >= 0 else None)
                # Every partition still to read, returned records or not: the position also moves past control
                # records (transaction markers) that poll never returns. Each position is known after the seek,
                # so asking for it needs no round trip.
                for tp in [tp for tp in todo if consumer.position(tp) >= end[tp]]:
                    todo.discard(tp)
                    consumer.pause(tp)
            if todo and (max_records is None or len(rows["key"]) < max_records):
                raise KafkaSourceError(_unfinished(settings, todo, reached, end, timeout_s))
    finally:
        consumer.close(autocommit=False)
    # A tail sample reads the same number of records from every partition, so each record stands for the
    # partition's retained messages over the records scanned there: the weight keeps per-partition load true.
    retained = {(tp.topic, tp.partition): end[tp] - begin[tp] for tp in tps}
    rows["weight"] = [retained[key] / scanned[key] for key in zip(rows["topic"], rows["partition"], strict=True)]
    if max_records is not None:
        rows = {k: v[:max_records] for k, v in rows.items()}
    return rows


def _unfinished(
    settings: KafkaSettings, todo: set[Any], reached: dict[Any, int], end: dict[Any, int], timeout_s: float
) -> str:
    """Why a tail sample is incomplete: the first partition not read to its end offset, how far it got, and how
    many more are short (a sample missing a partition's tail would weigh that partition wrongly)."""
    tp = min(todo)
    more = f" (and {len(todo) - 1} more partitions)" if len(todo) > 1 else ""
    return (
        f"sampling keys: Kafka at {settings.bootstrap_servers} did not deliver the sample within {timeout_s:g} s: "
        f"{tp.topic}-{tp.partition} was read to offset {reached[tp]} of its end offset {end[tp]}{more}"
    )


def _samples_table(sample_id: str, rows: dict[str, list[Any]]) -> pa.Table:
    schema = KEY_SAMPLES.schema
    n = len(rows["key"])
    columns = {
        "sample_id": pa.array([sample_id] * n, pa.string()),
        **{name: pa.array(values, schema.field(name).type) for name, values in rows.items()},
    }
    return pa.table([columns[f.name] for f in schema], schema=schema)
