package io.rebalanceplanner.apply;

import io.rebalanceplanner.apply.Matching.LiveMember;
import io.rebalanceplanner.apply.Matching.Match;
import io.rebalanceplanner.apply.Plan.PlanMember;

import org.apache.kafka.common.TopicPartition;

import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.function.Function;
import java.util.stream.Collectors;

/**
 * Serve the plan or fall back, and why: jobs/apply/decision.py decide, the rules every applier follows and the shared
 * fixtures (schemas/fixtures/apply) hold them to.
 *
 * @param assignment  the partitions to give each live member now (empty when falling back)
 * @param reasons     why the plan is not served; empty when it is
 * @param withheld    partitions withheld this round because another member still owns them (COOPERATIVE)
 */
public record Decision(Map<String, List<TopicPartition>> assignment, List<Reason> reasons, int withheld) {

    public static final String TOPIC_MISSING = "topic_missing";
    public static final String PARTITION_COUNT_CHANGED = "partition_count_changed";
    public static final String UNKNOWN_MEMBER = "unknown_member";
    public static final String MISSING_MEMBER = "missing_member";
    public static final String SUBSCRIPTION_CHANGED = "subscription_changed";

    /** Why a plan is not served: a reason code and the words a log line says it with. */
    public record Reason(String code, String message) { }

    /**
     * A live member with what it subscribes to and (COOPERATIVE, KIP-429) the partitions it reports owning.
     *
     * @param topics  subscribed topic names (a broker-side assignor names a topic the plan does not know by its id)
     */
    public record LiveSubscription(LiveMember member, Collection<String> topics, Collection<TopicPartition> owned) { }

    public boolean serve() {
        return reasons.isEmpty();
    }

    /** The distinct reason codes, sorted: what the fixtures' {@code reasons} list. */
    public Set<String> reasonCodes() {
        return reasons.stream().map(Reason::code).collect(Collectors.toCollection(TreeSet::new));
    }

    /** The reasons as one log line says them. */
    public String reasonText() {
        return reasons.stream().map(Reason::message).collect(Collectors.joining("; "));
    }

    public static Decision fallback(List<Reason> reasons) {
        return new Decision(Map.of(), List.copyOf(reasons), 0);
    }

    /**
     * Serve {@code plan} to {@code members} when they are the planned group on the planned topics, else say why not.
     *
     * @param partitionCount  a topic's partition count in the cluster now, null when the cluster has no metadata for it
     */
    public static Decision decide(Plan plan, Function<String, Integer> partitionCount, List<LiveSubscription> members) {
        List<Reason> reasons = new ArrayList<>();
        for (Map.Entry<String, Integer> e : plan.topics().entrySet()) {  // sorted by topic
            Integer now = partitionCount.apply(e.getKey());
            if (now == null) {
                reasons.add(new Reason(TOPIC_MISSING, "no partition metadata for topic " + Reasons.repr(e.getKey())));
            } else if (!now.equals(e.getValue())) {
                reasons.add(new Reason(PARTITION_COUNT_CHANGED, "partition count of " + Reasons.repr(e.getKey())
                    + " changed: planned " + e.getValue() + ", now " + now));
            }
        }
        Match match = Matching.match(plan.members(), members.stream().map(LiveSubscription::member).toList());
        for (LiveMember m : match.unknown()) {
            reasons.add(new Reason(UNKNOWN_MEMBER, "member "
                + Matching.describe(m.memberId(), m.groupInstanceId(), m.clientId()) + " is not in the plan"));
        }
        for (PlanMember p : match.missing()) {
            reasons.add(new Reason(MISSING_MEMBER, "planned member "
                + Matching.describe(p.memberId(), p.groupInstanceId(), p.clientId()) + " is missing"));
        }
        for (LiveSubscription m : members) {
            PlanMember planned = plan.members().get(match.planned().getOrDefault(m.member().memberId(), ""));
            List<String> now = List.copyOf(new TreeSet<>(m.topics()));
            if (planned != null && !now.equals(planned.topics())) {
                reasons.add(new Reason(SUBSCRIPTION_CHANGED, "subscription of " + Reasons.repr(m.member().memberId())
                    + " differs: planned " + Reasons.repr(planned.topics()) + ", now " + Reasons.repr(now)));
            }
        }
        if (!reasons.isEmpty()) {
            return fallback(reasons);
        }
        Map<TopicPartition, String> owners = new HashMap<>();
        for (LiveSubscription m : members) {
            m.owned().forEach(tp -> owners.put(tp, m.member().memberId()));
        }
        // Kafka: CooperativeStickyAssignor.adjustAssignment (KIP-429) - a partition changing owner is revoked first:
        // ConsumerCoordinator.validateCooperativeAssignment fails a round that gives a partition to a member while
        // another member revokes it. Under EAGER members own nothing when they join, and nothing is withheld.
        Map<String, List<TopicPartition>> assignment = new LinkedHashMap<>();
        int withheld = 0;
        for (LiveSubscription m : members) {
            String memberId = m.member().memberId();
            List<TopicPartition> planned = plan.members().get(match.planned().get(memberId)).assignment();
            List<TopicPartition> kept = planned.stream()
                .filter(tp -> owners.getOrDefault(tp, memberId).equals(memberId))
                .toList();
            assignment.put(memberId, kept);
            withheld += planned.size() - kept.size();
        }
        return new Decision(assignment, List.of(), withheld);
    }
}
