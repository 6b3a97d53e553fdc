"""Which group protocol a group runs (classic or KIP-848 consumer) and which planner strategy reproduces it today.

A classic group's assignment is computed by the leader's client assignor, elected from the members' protocols
(`snapshot.protocol`). A consumer group's is computed by the group coordinator's server assignor
(ConsumerGroupDescribe's AssignorName): Kafka ships `uniform` (the default, first in group.consumer.assignors)
and `range`, which this planner names `uniform` and `server-range` (its `range` is the client RangeAssignor).

>>> todays_strategy({"group_type": "consumer", "server_assignor": "range"})
'server-range'
>>> todays_strategy({"protocol": "cooperative-sticky"})
'cooperative-sticky'
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

GroupType = Literal["classic", "consumer"]

# Kafka: GroupCoordinatorConfig.CONSUMER_GROUP_ASSIGNORS_DEFAULT = [UniformAssignor, RangeAssignor]; the first is
# used unless a member asks for another with group.remote.assignor.
DEFAULT_SERVER_ASSIGNOR = "uniform"
SERVER_STRATEGIES: dict[str, str] = {"uniform": "uniform", "range": "server-range"}
# ConsumerPartitionAssignor.name() of the client assignors Kafka ships (the planner runs each under that name).
CLIENT_ASSIGNORS = ("range", "roundrobin", "sticky", "cooperative-sticky")


def group_type(doc: Mapping[str, Any]) -> GroupType:
    """The document's group type; absent means classic, as every group was before KIP-848."""
    return "consumer" if doc.get("group_type") == "consumer" else "classic"


def todays_strategy(doc: Mapping[str, Any]) -> str | None:
    """The planner strategy that computes what the group's own protocol computes now, or None for a custom one.

    Consumer groups: their server assignor (`uniform` when the broker did not say). Classic groups: the elected
    client assignor (`protocol`) when it is one of Kafka's own.
    """
    if group_type(doc) == "consumer":
        return SERVER_STRATEGIES.get(doc.get("server_assignor") or DEFAULT_SERVER_ASSIGNOR)
    protocol = doc.get("protocol")
    return protocol if protocol in CLIENT_ASSIGNORS else None


__all__ = [
    "CLIENT_ASSIGNORS",
    "DEFAULT_SERVER_ASSIGNOR",
    "SERVER_STRATEGIES",
    "GroupType",
    "group_type",
    "todays_strategy",
]
