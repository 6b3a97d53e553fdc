"""The assignors and the plug-in point: Kafka's built-in names and a `package.module:Class` loader.

An assignor is any object with a `name`, a `rebalance_protocol` ("eager" or "cooperative", as Kafka's
ConsumerPartitionAssignor.supportedProtocols) and `assign(group: GroupSpec)` returning the owner of every
partition: an int array indexed by partition id (-1 = unassigned), or {member: [(topic, partition)]}.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from typing import Literal, Protocol

import numpy as np

from planner.errors import InputError
from planner.group import GroupSpec

RebalanceProtocol = Literal["eager", "cooperative"]


class Assignor(Protocol):
    """What `planner.assign` needs from an assignor (built-in or plug-in)."""

    name: str

    def assign(self, group: GroupSpec) -> np.ndarray | Mapping[str, Sequence[tuple[str, int]]]: ...


# Kafka's assignor names (ConsumerPartitionAssignor.name()) -> the class, loaded like any plug-in.
BUILTIN: dict[str, str] = {
    "range": "planner.assignors.range:RangeAssignor",
    "roundrobin": "planner.assignors.round_robin:RoundRobinAssignor",
    "sticky": "planner.assignors.sticky:StickyAssignor",
    "cooperative-sticky": "planner.assignors.cooperative_sticky:CooperativeStickyAssignor",
    "balanced-load": "planner.assignors.balanced_load:BalancedLoadAssignor",
    "cooperative-balanced-load": "planner.assignors.cooperative_balanced_load:CooperativeBalancedLoadAssignor",
    # KIP-848 server-side assignors; Kafka names the range one "range" too, which the client assignor holds here.
    "uniform": "planner.assignors.uniform:UniformAssignor",
    "server-range": "planner.assignors.server_range:ServerRangeAssignor",
}


def load(strategy: str) -> Assignor:
    """The assignor for a built-in name or a `package.module:Class` plug-in (built with no arguments)."""
    module_name, sep, attr = BUILTIN.get(strategy, strategy).partition(":")
    if not sep or not module_name or not attr:
        raise InputError(f"unknown strategy {strategy!r}: use {sorted(BUILTIN)} or package.module:Class")
    try:
        cls = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as e:
        raise InputError(f"cannot load assignor {strategy!r}: {e}") from e
    try:
        assignor: Assignor = cls()
    except TypeError as e:
        raise InputError(f"cannot build assignor {strategy!r} with no arguments: {e}") from e
    if not callable(getattr(assignor, "assign", None)):
        raise InputError(f"assignor {strategy!r} has no assign(group) method")
    return assignor


def protocol_of(assignor: Assignor) -> RebalanceProtocol:
    """The rebalance protocol an assignor follows; plug-ins without one are eager, like Kafka's default."""
    return getattr(assignor, "rebalance_protocol", "eager")


def owners_from(group: GroupSpec, result: np.ndarray | Mapping[str, Sequence[tuple[str, int]]]) -> np.ndarray:
    """Normalize an assignor's answer to int32 owner[partition]; rejects unknown members or partitions."""
    if isinstance(result, np.ndarray):
        owner = np.asarray(result, dtype=np.int32)
        if owner.shape != (group.num_partitions,):
            raise ValueError(f"assignor returned {owner.shape} owners for {group.num_partitions} partitions")
        return owner
    member_id = {m: i for i, m in enumerate(group.members)}
    topic_id = {t: i for i, t in enumerate(group.topics)}
    owner = np.full(group.num_partitions, -1, dtype=np.int32)
    for m, parts in result.items():
        if m not in member_id:
            raise ValueError(f"assignor assigned partitions to unknown member {m!r}")
        for t, p in parts:
            if t not in topic_id or not 0 <= p < group.partition_counts[topic_id[t]]:
                raise ValueError(f"assignor assigned unknown partition {t}-{p}")
            pid = group.topic_start[topic_id[t]] + p
            if owner[pid] >= 0:
                raise ValueError(f"assignor assigned {t}-{p} twice")
            owner[pid] = member_id[m]
    return owner


__all__ = ["BUILTIN", "Assignor", "RebalanceProtocol", "load", "owners_from", "protocol_of"]
