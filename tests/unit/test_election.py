"""Assignor election by vote (article A3, Kafka ClassicGroup.selectProtocol) and INCONSISTENT_GROUP_PROTOCOL."""

import pytest

from planner.coordinator import java_string_hash
from planner.election import InconsistentGroupProtocolError, java_hashmap_order, select_protocol


def test_most_votes_wins() -> None:
    election = select_protocol(
        {
            "c1": ["roundrobin", "range"],
            "c2": ["roundrobin", "range"],
            "c3": ["range", "roundrobin"],
        }
    )
    assert election.protocol == "roundrobin"
    assert election.votes == {"roundrobin": 2, "range": 1}
    assert election.candidates == ("range", "roundrobin")


def test_only_protocols_every_member_supports_are_candidates() -> None:
    """Seed 003: candidates are collected first; each member votes for its first supported candidate."""
    election = select_protocol(
        {
            "c1": ["sticky", "range"],
            "c2": ["sticky", "range"],
            "c3": ["range"],
        }
    )
    assert election.candidates == ("range",)
    assert election.protocol == "range" and election.votes == {"range": 3}


def test_java_hashmap_iteration_order() -> None:
    """Buckets of a 16-slot table: (h ^ h >>> 16) & 15 of String.hashCode."""

    def bucket(s: str) -> int:
        h = java_string_hash(s) & 0xFFFFFFFF
        return (h ^ (h >> 16)) & 15

    assert [bucket(s) for s in ("sticky", "range", "roundrobin", "cooperative-sticky")] == sorted(
        bucket(s) for s in ("sticky", "range", "roundrobin", "cooperative-sticky")
    )
    assert java_hashmap_order(["range", "roundrobin", "sticky", "cooperative-sticky"]) == [
        "sticky",
        "range",
        "roundrobin",
        "cooperative-sticky",
    ]


def test_tie_goes_to_first_in_hashmap_order_not_join_order() -> None:
    """A 1-1 tie between range and roundrobin: Stream.max keeps the earlier entry, range (bucket order)."""
    for members in (
        {"a": ["range", "roundrobin"], "b": ["roundrobin", "range"]},
        {"b": ["roundrobin", "range"], "a": ["range", "roundrobin"]},
    ):
        assert select_protocol(members).protocol == "range"
    tie = select_protocol({"m1": ["cooperative-sticky", "sticky"], "m2": ["sticky", "cooperative-sticky"]})
    assert tie.protocol == "sticky"


def test_member_supporting_no_candidate_is_rejected_at_join() -> None:
    """Kafka wins over article A3: the article's IllegalArgumentException ("Member does not support
    protocol") cannot happen in a running group, because ClassicGroup.supportsProtocols already rejects the
    JoinGroup with INCONSISTENT_GROUP_PROTOCOL."""
    with pytest.raises(InconsistentGroupProtocolError, match="INCONSISTENT_GROUP_PROTOCOL: member c3") as e:
        select_protocol({"c1": ["range", "roundrobin"], "c2": ["roundrobin"], "c3": ["sticky", "range"]})
    assert e.value.code == 23
    assert "['roundrobin']" in str(e.value)


def test_member_without_protocols_and_empty_group() -> None:
    with pytest.raises(InconsistentGroupProtocolError, match="offers no"):
        select_protocol({"c1": []})
    with pytest.raises(ValueError, match="empty group"):
        select_protocol({})


def test_single_member_votes_for_its_first_choice() -> None:
    assert select_protocol({"solo": ["cooperative-sticky", "range"]}).protocol == "cooperative-sticky"
