"""Random groups in `rebalance assign`'s compact form, for the output tests: topics, members, subscriptions and
previous ownership drawn from given names."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hypothesis import strategies as st


@st.composite
def groups(
    draw: st.DrawFn,
    topic_names: Sequence[str],
    member_names: Sequence[str],
    *,
    members: tuple[int, int | None] = (0, None),
    max_topics: int | None = None,
) -> Any:
    """A group of topics of 0-9 partitions and distinct members (`members`: how many, at least and at most), each
    subscribed to some of the topics and owning up to 8 of their partitions (one may be claimed twice), generation
    1-3."""
    topics = draw(st.dictionaries(st.sampled_from(topic_names), st.integers(0, 9), min_size=1, max_size=max_topics))
    least, most = members
    names = draw(st.lists(st.sampled_from(member_names), min_size=least, max_size=most, unique=True))
    parts = [(t, p) for t, n in topics.items() for p in range(n)]
    return {
        "topics": topics,
        "members": {
            m: {
                "topics": draw(st.lists(st.sampled_from(sorted(topics)), unique=True)),
                "owned": draw(st.lists(st.sampled_from(parts), max_size=8)) if parts else [],
                "generation": draw(st.integers(1, 3)),
            }
            for m in names
        },
    }
