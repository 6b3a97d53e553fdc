"""The sticky algorithm shared by StickyAssignor and CooperativeStickyAssignor (AbstractStickyAssignor).

Guarantees, in priority order (AbstractStickyAssignor javadoc, KIP-54):
1. balance: members' partition counts differ by at most one, or a member with at least two fewer partitions
   than another subscribes to none of that member's partitions' topics;
2. stickiness: as many partitions as possible stay with their previous owner.

Like Kafka 4.x it has two builders. With identical subscriptions, ConstrainedAssignmentBuilder (KAFKA-9987) is
mirrored step by step: keep owned partitions up to the quota, then fill members round-robin. With differing
subscriptions, GeneralAssignmentBuilder's first steps are mirrored (keep what is still valid, hand each
unassigned partition to the least-loaded subscriber, topics with fewest subscribers first) and its per-partition
reassignment loop is replaced by per-topic water-levelling, which ends exactly when its isBalanced holds.
Java iterates members in HashMap order where the order matters; we use member id order, so results are
deterministic. Rack matching (KIP-881) applies when members have racks, partitions have replica racks and some
partitions live on only some racks (RackInfo, useRackAwareAssignment), in both builders exactly as Kafka: owned
partitions off the owner's rack are given up (racksMismatch); the constrained builder deals partitions to members
on their racks first (assignRackAwareRoundRobin); the general builder hands each unassigned partition to the
least-loaded subscriber on one of its racks (or without a rack) before handing the rest out without racks.

Everything is array-based: owner[partition] (-1 = unassigned) and counts[member] (KAFKA-13398 scale: a million
partitions and thousands of members in well under a second). The rack passes scan partitions one at a time, as
Kafka does: about a second for a million partitions on three racks.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from planner.assignors._arrays import concat_ranges
from planner.group import NO_RACK, GroupSpec, PartitionRacks, previous_owners, subscribed_topics


def sticky_assign(group: GroupSpec, *, prefer_rack_aware_logic: bool = False) -> np.ndarray:
    """The balanced, sticky owner of every partition (AbstractStickyAssignor.assignPartitions).

    `prefer_rack_aware_logic` is Kafka's test hook AbstractPartitionAssignor.preferRackAwareLogic: take the
    rack-aware path even when every partition is on every rack.
    """
    owned, _ = previous_owners(group)
    if not group.members:
        return np.full(group.num_partitions, -1, dtype=np.int32)
    racks = _rack_info(group, prefer_rack_aware_logic)  # assignPartitions builds RackInfo before either builder
    if _all_subscriptions_equal(group):
        return _constrained_assign(group, owned, racks)
    return _general_assign(group, owned, racks)


@dataclass(frozen=True)
class _RackInfo:
    """AbstractStickyAssignor.RackInfo when rack-aware assignment is on (members and partitions as ids)."""

    member_rack: np.ndarray  # per member: its rack id, NO_RACK or UNKNOWN_RACK (PartitionRacks.member_racks)
    racks: PartitionRacks  # replica racks per partition id
    consumers_on: np.ndarray  # per partition id: numConsumersByPartition, members on any of its racks

    def mismatches(self, members: np.ndarray, partitions: np.ndarray) -> NDArray[np.bool_]:
        """racksMismatch per (member, partition) pair: the member has a rack and the partition no replica on it."""
        rack = self.member_rack[members]
        mismatched: NDArray[np.bool_] = (rack != NO_RACK) & ~self.racks.contains(partitions, rack)
        return mismatched


def _rack_info(group: GroupSpec, prefer: bool) -> _RackInfo | None:
    """RackInfo: None unless rack-aware assignment is on (useRackAwareAssignment over the subscribed topics)."""
    racks = group.partition_racks
    if racks is None or not any(group.racks):  # consumersByRack empty, or partitionInfosWithoutRacks
        return None
    member_rack = racks.member_racks(group.racks)  # consumerRacks
    assignable = np.repeat(subscribed_topics(group), group.partition_counts)
    sizes = np.diff(racks.offsets)
    every = np.unique(racks.ids[np.repeat(assignable, sizes)])  # partitionsByRack.keySet()
    if not np.isin(member_rack, every).any():  # Collections.disjoint(consumerRacks, partitionRacks)
        return None
    # Every partition on every rack (a partition's racks are a subset of `every`): rack-aware only if preferred.
    if bool((sizes[assignable] == len(every)).all()) and not prefer:
        return None
    on_rack = np.bincount(member_rack[member_rack >= 0], minlength=len(racks.names))
    holder = np.repeat(np.arange(group.num_partitions), sizes)
    consumers_on = np.bincount(holder, weights=on_rack[racks.ids], minlength=group.num_partitions).astype(np.int64)
    return _RackInfo(member_rack, racks, consumers_on)


def _all_subscriptions_equal(group: GroupSpec) -> bool:
    """AbstractStickyAssignor.allSubscriptionsEqual: every member lists the same topics (missing ones included).

    Java seeds the comparison with the first non-empty subscription it meets in HashMap order, so a member with
    no topics can slip into the constrained path and be handed partitions it did not subscribe to; an empty
    subscription here makes the group unequal, which keeps the "only subscribed topics" guarantee.
    """
    if not group.members:
        return True
    first, unknown = group.subscriptions[0].tobytes(), group.unknown_topics[0]
    # Byte comparison of the sorted topic-id arrays: one cheap call per member even for 10,000 members.
    return len(first) > 0 and all(
        s.tobytes() == first and u == unknown for s, u in zip(group.subscriptions, group.unknown_topics, strict=True)
    )


def _constrained_assign(group: GroupSpec, owned: np.ndarray, racks: _RackInfo | None) -> np.ndarray:
    """ConstrainedAssignmentBuilder.build: assignOwnedPartitions, assignRackAwareRoundRobin, assignRoundRobin."""
    n_members = len(group.members)
    assignable = np.repeat(subscribed_topics(group), group.partition_counts)
    total = int(assignable.sum())
    min_quota, extra = divmod(total, n_members)
    max_quota = min_quota + (1 if extra else 0)
    owner = np.full(group.num_partitions, -1, dtype=np.int32)

    # assignOwnedPartitions: with racks, owned partitions off the owner's rack are given up first (racksMismatch);
    # then each member's owned partitions sorted by (partition, topic), first `quota` kept.
    parts = np.flatnonzero(owned >= 0)
    if racks is not None:
        parts = parts[~racks.mismatches(owned[parts], parts)]
    members = owned[parts]
    topic = group.topic_of(parts)
    order = np.lexsort((topic, parts - group.topic_start[topic], members))
    parts, members = parts[order], members[order]
    n_owned = np.bincount(members, minlength=n_members)
    keep = np.zeros(n_members, dtype=np.int64)
    under_min: list[int] = []  # unfilledMembersWithUnderMinQuotaPartitions
    exactly_min: list[int] = []  # unfilledMembersWithExactlyMinQuotaPartitions
    over_min = 0  # currentNumMembersWithOverMinQuotaPartitions
    for m in range(n_members):  # Java: HashMap order; here member id order
        k = int(n_owned[m])
        if k < min_quota:
            keep[m] = k
            under_min.append(m)
        elif k >= max_quota and over_min < extra:
            over_min += 1
            if over_min == extra:
                exactly_min.clear()
            keep[m] = max_quota
        else:
            keep[m] = min_quota
            if over_min < extra:
                exactly_min.append(m)
    first_of = np.searchsorted(members, np.arange(n_members))
    kept = (np.arange(len(parts)) - first_of[members]) < keep[members]
    owner[parts[kept]] = members[kept]

    unassigned = np.flatnonzero(assignable & (owner < 0))
    if racks is not None:
        # sortPartitionsByRackConsumers: a stable sort by how many members are on the partition's racks.
        unassigned = unassigned[np.argsort(racks.consumers_on[unassigned], kind="stable")]
        unassigned = _rack_aware_round_robin(
            racks, unassigned, owner, keep, under_min, exactly_min, over_min, (min_quota, max_quota, extra)
        )

    # assignRoundRobin: unassigned partitions (in (topic, partition) order, or what the rack pass left in its
    # order) go round-robin to the members under minQuota (each round visits those still under it, in member
    # id order: Collections.sort); a member reaching minQuota joins the tail of exactly_min; what is left goes
    # one each to exactly_min's head.
    under = np.asarray(under_min, dtype=np.int64)
    deficit = min_quota - keep[under]
    rounds = concat_ranges(deficit)
    slot = np.lexsort((np.repeat(np.arange(len(under)), deficit), rounds))
    receivers = np.repeat(under, deficit)[slot][: len(unassigned)]
    owner[unassigned[: len(receivers)]] = receivers
    reached = under[np.lexsort((np.arange(len(under)), deficit))]
    rest = unassigned[len(receivers) :]
    polled = np.concatenate([np.asarray(exactly_min, dtype=np.int64), reached])[: len(rest)]
    if len(polled) < len(rest):
        raise AssertionError("Some partitions are unassigned but all consumers are at maximum capacity")
    owner[rest] = polled
    return owner


def _rack_aware_round_robin(
    racks: _RackInfo,
    unassigned: np.ndarray,
    owner: np.ndarray,
    counts: np.ndarray,
    under_min: list[int],
    exactly_min: list[int],
    over_min: int,
    quotas: tuple[int, int, int],
) -> np.ndarray:
    """assignRackAwareRoundRobin: each partition, in order, to the next member under minQuota on one of its racks
    (round-robin from where the last one was found), else to the first member at minQuota on one of its racks
    that may still take one; returns the partitions left unassigned, in order. Updates `counts` and both lists.

    A sequential scan, as in Kafka: each choice moves the round-robin position and may fill a member.
    """
    min_quota, max_quota, expected = quotas
    member_rack = racks.member_rack.tolist()
    ids, offsets = racks.racks.ids.tolist(), racks.racks.offsets.tolist()
    count = counts.tolist()

    def next_rack_consumer(p: int, members: list[int], first: int) -> int:
        """nextRackConsumer: index of the first member on one of p's racks, from `first`, wrapping; -1 if none."""
        on = ids[offsets[p] : offsets[p + 1]]
        if on:
            for i in range(len(members)):
                index = (first + i) % len(members)
                if member_rack[members[index]] in on:
                    return index
        return -1

    left: list[int] = []
    placed: list[int] = []
    takers: list[int] = []
    next_index = 0
    for p in unassigned.tolist():
        consumer = -1
        index = next_rack_consumer(p, under_min, next_index)
        if index >= 0:
            consumer = under_min[index]
            if count[consumer] + 1 >= min_quota:
                del under_min[index]
                # Only members that could still take the extra partition count as unfilled at minQuota.
                if count[consumer] + 1 < max_quota and over_min < expected:
                    exactly_min.append(consumer)
            else:
                index += 1
            next_index = index % len(under_min) if under_min else 0
        elif exactly_min:
            first = next_rack_consumer(p, exactly_min, 0)
            if first >= 0:
                consumer = exactly_min[first]
                if count[consumer] + 1 == max_quota:
                    del exactly_min[first]
                    over_min += 1
                    if over_min == expected:  # every member at minQuota is filled now
                        exactly_min.clear()
        if consumer >= 0:
            placed.append(p)
            takers.append(consumer)
            count[consumer] += 1
        else:
            left.append(p)
    owner[placed] = takers
    counts[:] = count
    return np.asarray(left, dtype=np.int64)


def _general_assign(group: GroupSpec, owned: np.ndarray, racks: _RackInfo | None) -> np.ndarray:
    """GeneralAssignmentBuilder.build: keep valid ownership, assign the rest greedily, then balance."""
    sub = group.subscribed_matrix()
    topic = group.topic_of(np.arange(group.num_partitions))
    # assignOwnedPartitions: a claim survives only while its owner still subscribes to the topic and, with
    # rack-aware assignment, the partition has a replica on the owner's rack (racksMismatch); dropping either
    # sets revocationRequired.
    valid = (owned >= 0) & sub[np.maximum(owned, 0), topic]
    if racks is not None:
        claimed = np.flatnonzero(valid)
        valid[claimed[racks.mismatches(owned[claimed], claimed)]] = False
    revocation_required = bool(np.any((owned >= 0) & ~valid))
    owner = np.where(valid, owned, -1).astype(np.int32)
    counts = np.bincount(owner[owner >= 0], minlength=len(group.members)).astype(np.int64)
    subscribers = [np.flatnonzero(sub[:, t]) for t in range(len(group.topics))]
    # TopicComparator: topics with fewer potential consumers first, then by name (ids are name-ordered).
    order = sorted(np.flatnonzero(subscribed_topics(group)).tolist(), key=lambda t: (len(subscribers[t]), t))
    # balance(): "First assign with rack matching and then assign any remaining without rack matching": the
    # rack pass goes over every topic before the plain pass hands out what it left.
    if racks is not None:
        for t in order:
            _assign_on_racks(group, racks, owner, counts, t, subscribers[t])
    for t in order:
        _assign_unassigned(group, owner, counts, t, subscribers[t])
    # balance(): "if we don't already need to revoke something due to subscription changes, first try to
    # balance by only moving newly added partitions", then move any. Each pass strictly lowers sum(counts**2),
    # so both loops end, usually after one or two passes. Racks change nothing here: performReassignments'
    # rack branch ("Use consumer within rack if possible") moves a partition only when a subscriber on its rack
    # has two fewer partitions, which the plain branch also finds, and both call reassignPartition, which
    # picks the least-loaded subscriber whatever its rack.
    for fresh_only in [True, False] if not revocation_required else [False]:
        while any([_level(group, owner, counts, owned, t, subscribers[t], fresh_only) for t in order]):
            pass
    return owner


def _assign_on_racks(
    group: GroupSpec, racks: _RackInfo, owner: np.ndarray, counts: np.ndarray, t: int, eligible: np.ndarray
) -> None:
    """maybeAssign(partitionsToAssign, rackInfo, true) for one topic; partitions nobody matches stay unassigned."""
    span = slice(int(group.topic_start[t]), int(group.topic_start[t + 1]))
    free = np.flatnonzero(owner[span] < 0) + span.start
    if len(free) == 0:
        return
    # maybeAssignPartition: the first of sortedCurrentSubscriptions (fewest partitions, then member id) that
    # subscribes and does not racksMismatch: a member without a rack, or one on a rack of the partition's
    # replicas. Members on one rack form a class (the rackless ones class n_racks); members on a rack holding
    # no partition (UNKNOWN_RACK) mismatch every partition and are in none.
    rack = racks.member_rack[eligible]
    n_racks = len(racks.racks.names)
    cls = np.where(rack == NO_RACK, n_racks, rack)
    class_size = np.bincount(cls[cls >= 0], minlength=n_racks + 1)
    sizes = racks.racks.offsets[free + 1] - racks.racks.offsets[free]
    on = racks.racks.ids[np.repeat(racks.racks.offsets[free], sizes) + concat_ranges(sizes)]
    matched = class_size[on] > 0
    usable = on[matched]  # per free partition, in order: the classes on its racks
    row = np.repeat(np.arange(len(free)), sizes)[matched]
    reach = np.bincount(row, minlength=len(free))
    if (cls >= 0).all() and reach.min() == np.count_nonzero(class_size[:n_racks]):
        _assign_unassigned(group, owner, counts, t, eligible)  # every subscriber matches every partition here
        return
    # Within a class the picks follow its water-fill slots, (count before the pick, member id) ascending, as
    # many as the partitions it could take, then a sentinel; a partition takes the smallest next slot among
    # its classes. A sequential scan, as in Kafka: each pick moves one class on.
    width, never = len(group.members), 1 << 62
    slots: list[list[int]] = []
    for c in range(n_racks + 1):
        mine = eligible[cls == c]
        cap = len(free) if c == n_racks else int(np.count_nonzero(usable == c))
        added = _water_fill(counts[mine], cap, tie=np.zeros(len(mine), dtype=np.int64)) if len(mine) else mine
        keys = (np.repeat(counts[mine], added) + concat_ranges(added)) * width + np.repeat(mine, added)
        slots.append([*np.sort(keys).tolist(), never])
    # The classes each partition can use, one tuple per distinct set (few): rows padded with -1, made unique.
    table = np.full((len(free), int(reach.max(initial=0))), -1, dtype=np.int64)
    table[row, concat_ranges(reach)] = usable
    distinct, kind = np.unique(table, axis=0, return_inverse=True)
    rackless = [n_racks] if class_size[n_racks] else []
    choices = [(*rackless, *(c for c in r if c >= 0)) for r in distinct.tolist()]
    head = [s[0] for s in slots]
    used = [0] * (n_racks + 1)
    picked = [never] * len(free)
    for i, k in enumerate(kind.ravel().tolist()):
        best, pick = never, -1
        for c in choices[k]:
            if head[c] < best:
                best, pick = head[c], c
        if pick >= 0:
            picked[i] = best
            used[pick] += 1
            head[pick] = slots[pick][used[pick]]
    keys = np.asarray(picked, dtype=np.int64)
    done = keys != never
    owner[free[done]] = keys[done] % width
    counts += np.bincount(keys[done] % width, minlength=len(counts))


def _assign_unassigned(group: GroupSpec, owner: np.ndarray, counts: np.ndarray, t: int, eligible: np.ndarray) -> None:
    """maybeAssign for one topic: each unassigned partition, in order, to the eligible member with the fewest
    partitions (sortedCurrentSubscriptions: by count, then member id), computed as one water-fill."""
    span = slice(int(group.topic_start[t]), int(group.topic_start[t + 1]))
    free = np.flatnonzero(owner[span] < 0) + span.start
    if len(free) == 0:
        return
    base = counts[eligible]
    added = _water_fill(base, len(free), tie=np.zeros(len(eligible), dtype=np.int64))
    # The pick sequence sorts every (level, member id) slot a member fills: level first, then id.
    levels = np.repeat(base, added) + concat_ranges(added)
    takers = np.repeat(eligible, added)
    owner[free] = takers[np.lexsort((takers, levels))]
    counts[eligible] += added


def _water_fill(base: np.ndarray, units: int, tie: np.ndarray) -> NDArray[np.int64]:
    """Units per member so that base + added is as level as possible; the level's remainder goes to the
    members with the largest `tie`, then the lowest index."""
    lo, hi = int(base.min()), int(base.min()) + units
    while lo < hi:  # the highest level L with sum(max(0, L - base)) <= units
        mid = (lo + hi + 1) // 2
        if int(np.maximum(mid - base, 0).sum()) <= units:
            lo = mid
        else:
            hi = mid - 1
    added: NDArray[np.int64] = np.maximum(lo - base, 0)
    remainder = units - int(added.sum())
    at_level = np.flatnonzero(base <= lo)
    lucky = at_level[np.lexsort((at_level, -tie[at_level]))][:remainder]
    added[lucky] += 1
    return added


def _level(
    group: GroupSpec,
    owner: np.ndarray,
    counts: np.ndarray,
    owned: np.ndarray,
    t: int,
    subscribers: np.ndarray,
    fresh_only: bool,
) -> bool:
    """Re-level topic t's movable partitions over its subscribers when one holding such a partition has two
    or more partitions more than another subscriber (the move performReassignments looks for); returns True
    if anything moved. Movable: all of t's partitions, or with `fresh_only` those not owned by their holder.

    Holders keep what they can: the level's remainder goes to those holding most, and a holder gives up
    partitions it did not own before first (stickiness), then its lowest-numbered ones.
    """
    if len(subscribers) < 2:  # canTopicParticipateInReassignment
        return False
    span = slice(int(group.topic_start[t]), int(group.topic_start[t + 1]))
    movable = owned[span] != owner[span] if fresh_only else np.ones(span.stop - span.start, dtype=bool)
    slot = np.full(len(group.members), -1, dtype=np.int64)
    slot[subscribers] = np.arange(len(subscribers))
    held = np.bincount(slot[owner[span][movable]], minlength=len(subscribers))
    c = counts[subscribers]
    if c[held > 0].max(initial=0) - c.min() <= 1:
        return False
    new_held = _water_fill(c - held, int(held.sum()), tie=held)
    give = held - new_held
    # Which partitions each giver releases: not previously owned by it first, then lowest partition first, as
    # performReassignments walks the partitions in order and moves each one whose owner is still overloaded.
    parts = np.arange(span.start, span.stop)[movable]
    givers = slot[owner[parts]]
    rank = np.lexsort((parts, owned[parts] == owner[parts], givers))
    parts, givers = parts[rank], givers[rank]
    first_of = np.searchsorted(givers, np.arange(len(subscribers)))
    released = (np.arange(len(parts)) - first_of[givers]) < np.maximum(give, 0)[givers]
    take = np.maximum(-give, 0)
    owner[parts[released]] = subscribers[np.repeat(np.arange(len(subscribers)), take)]
    counts[subscribers] += new_held - held
    return True
