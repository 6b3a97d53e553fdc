package io.rebalanceplanner.apply.broker;

import io.rebalanceplanner.apply.Decision;
import io.rebalanceplanner.apply.Decision.LiveSubscription;
import io.rebalanceplanner.apply.Decision.Reason;
import io.rebalanceplanner.apply.Matching;
import io.rebalanceplanner.apply.Matching.LiveMember;
import io.rebalanceplanner.apply.Plan;
import io.rebalanceplanner.apply.Reasons;

import org.apache.kafka.common.Configurable;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.coordinator.group.api.assignor.ConsumerGroupPartitionAssignor;
import org.apache.kafka.coordinator.group.api.assignor.GroupAssignment;
import org.apache.kafka.coordinator.group.api.assignor.GroupSpec;
import org.apache.kafka.coordinator.group.api.assignor.MemberAssignment;
import org.apache.kafka.coordinator.group.api.assignor.MemberSubscription;
import org.apache.kafka.coordinator.group.api.assignor.PartitionAssignorException;
import org.apache.kafka.coordinator.group.api.assignor.SubscribedTopicDescriber;
import org.apache.kafka.coordinator.group.assignor.UniformAssignor;
import org.apache.kafka.coordinator.group.modern.MemberAssignmentImpl;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;

/**
 * A broker-side assignor for KIP-848 consumer groups that serves the approved plan of a group it recognises, and
 * otherwise assigns exactly as Kafka's {@code uniform} does (it delegates to an instance of UniformAssignor).
 *
 * <pre>
 * # server.properties: the built-in assignors stay; the first one is the default for groups that name none
 * group.consumer.assignors=uniform,range,io.rebalanceplanner.apply.broker.PlannedGroupAssignor
 * rebalance.plan.dir=/var/lib/kafka/rebalance-plans        (else the environment variable REBALANCE_PLAN_DIR)
 * # a consumer (group.protocol=consumer) chooses it with
 * group.remote.assignor=rebalance-planned
 * </pre>
 *
 * <p>Configuration: Kafka 4.4 instantiates each class of group.consumer.assignors and, when it is Configurable,
 * calls {@code configure(config.originals())} with the broker's whole configuration
 * (GroupCoordinatorConfig.consumerGroupAssignors), so {@value #PLAN_DIR_CONFIG} is a broker property; an unknown
 * property is kept in the originals. Without it the environment variable {@value #PLAN_DIR_ENV} names the directory.
 *
 * <p>Recognising a group: GroupSpec carries no group id and KIP-848 member ids are made by the client (no client id
 * in them), so a plan is the group's when at least one live member is one of its planned members, by
 * group.instance.id (a static member) or by member id (the member never left since the snapshot): matching rules 1 and
 * 2 of {@link Matching}. A group no plan recognises is assigned as uniform, silently. A recognised plan is served when
 * it fits ({@link Decision#decide}, with topics resolved through the plan's topic ids, since the broker sees topics by
 * id only); otherwise ONE warning says why and uniform assigns. When several plans recognise the group, the one that
 * fits is served; two that fit are ambiguous and neither is.
 *
 * <p>KIP-848 needs no two-phase move: the assignor computes the group's target assignment, and the coordinator's
 * reconciliation (CurrentAssignmentBuilder) revokes a partition from its owner before it gives it to another member.
 *
 * <p>Plans are read from the directory at every assignment, each file parsed again only when it changed, so a new plan
 * is picked up at the next group epoch bump without a restart. Nothing about a plan can fail an assignment: a
 * malformed plan file is ignored with one log line, and an unexpected error falls back to uniform with one.
 */
public class PlannedGroupAssignor implements ConsumerGroupPartitionAssignor, Configurable {
    public static final String NAME = "rebalance-planned";
    public static final String PLAN_DIR_CONFIG = "rebalance.plan.dir";
    public static final String PLAN_DIR_ENV = "REBALANCE_PLAN_DIR";
    public static final String NO_MATCHING_PLAN = "no_matching_plan";
    public static final String NO_TOPIC_IDS = "no_topic_ids";
    public static final String AMBIGUOUS_PLAN = "ambiguous_plan";

    private static final Logger log = LoggerFactory.getLogger(PlannedGroupAssignor.class);

    private final UniformAssignor uniform = new UniformAssignor();
    private volatile PlanDirectory plans;

    /** Reads the plan directory from {@value #PLAN_DIR_CONFIG}, else from the environment ({@value #PLAN_DIR_ENV}). */
    @Override
    public void configure(Map<String, ?> configs) {
        Object configured = configs.get(PLAN_DIR_CONFIG);
        String directory = configured != null ? configured.toString().trim() : System.getenv(PLAN_DIR_ENV);
        if (directory == null || directory.isEmpty()) {
            log.warn("planned assignor: no plan directory ({} or environment {}): every group is assigned as {}",
                PLAN_DIR_CONFIG, PLAN_DIR_ENV, uniform.name());
            plans = null;
            return;
        }
        plans = new PlanDirectory(Path.of(directory));
        log.info("planned assignor {}: serving the plans of {}", NAME, plans.directory());
    }

    @Override
    public String name() {
        return NAME;
    }

    @Override
    public GroupAssignment assign(GroupSpec groupSpec, SubscribedTopicDescriber subscribedTopicDescriber)
        throws PartitionAssignorException {
        Choice choice;
        try {
            choice = choose(groupSpec, subscribedTopicDescriber);
        } catch (RuntimeException e) {
            log.error("planned assignor: no plan served (unexpected error); assigning with {}", uniform.name(), e);
            return uniform.assign(groupSpec, subscribedTopicDescriber);
        }
        if (choice.decision().serve()) {
            log.info("planned assignor: serving plan of group {} generation {} ({}, file {}) to {} members",
                Reasons.repr(choice.plan().groupId()), choice.plan().generationId(), choice.plan().strategy(),
                choice.file(), groupSpec.memberIds().size());
            return assignment(choice.plan(), choice.decision());
        }
        if (choice.plan() != null) {
            log.warn("planned assignor: plan of group {} generation {} (file {}) not served ({}); assigning with {}",
                Reasons.repr(choice.plan().groupId()), choice.plan().generationId(), choice.file(),
                choice.decision().reasonText(), uniform.name());
        }
        return uniform.assign(groupSpec, subscribedTopicDescriber);
    }

    /** The plan chosen for the group (null when none recognises it), its file, and whether to serve it. */
    record Choice(String file, Plan plan, Decision decision) { }

    /** Which plan of the directory is this group's, and whether it fits the group now. */
    Choice choose(GroupSpec groupSpec, SubscribedTopicDescriber topics) {
        PlanDirectory directory = plans;
        Map<String, Plan> candidates = directory == null ? Map.of() : directory.plans();
        List<LiveMember> live = new ArrayList<>();
        for (String memberId : groupSpec.memberIds()) {
            MemberSubscription subscription = groupSpec.memberSubscription(memberId);
            live.add(new LiveMember(memberId, subscription.instanceId(), Optional.empty()));
        }
        List<Choice> recognised = new ArrayList<>();
        for (Map.Entry<String, Plan> e : candidates.entrySet()) {
            int matched = Matching.match(e.getValue().members(), live).planned().size();
            if (matched > 0) {
                recognised.add(new Choice(e.getKey(), e.getValue(), decide(e.getValue(), groupSpec, topics, live)));
            }
        }
        if (recognised.isEmpty()) {
            return new Choice(null, null, Decision.fallback(List.of(new Reason(NO_MATCHING_PLAN,
                "no plan in " + (directory == null ? "(no directory)" : directory.directory()) + " names a member"))));
        }
        List<Choice> fitting = recognised.stream().filter(c -> c.decision().serve()).toList();
        if (fitting.size() == 1) {
            return fitting.get(0);
        }
        if (fitting.size() > 1) {
            List<String> files = fitting.stream().map(Choice::file).toList();
            return new Choice(String.join(", ", files), fitting.get(0).plan(), Decision.fallback(List.of(new Reason(
                AMBIGUOUS_PLAN, "the plans of files " + Reasons.repr(files) + " all fit the group"))));
        }
        // None fits: the one that knows most of the live members says why (the first file on a tie).
        Choice best = recognised.get(0);
        int bestMatched = -1;
        for (Choice c : recognised) {
            int matched = Matching.match(c.plan().members(), live).planned().size();
            if (matched > bestMatched) {
                best = c;
                bestMatched = matched;
            }
        }
        return best;
    }

    /** {@link Decision#decide} on the broker: topics by id, through the plan's topic ids. */
    private static Decision decide(Plan plan, GroupSpec groupSpec, SubscribedTopicDescriber topics,
                                   List<LiveMember> live) {
        if (plan.topicIds().isEmpty()) {
            return Decision.fallback(List.of(new Reason(NO_TOPIC_IDS,
                "the plan has no topic ids, and a broker knows topics by id only")));
        }
        Map<Uuid, String> names = new HashMap<>();
        plan.topicIds().forEach((name, id) -> names.put(Uuid.fromString(id), name));
        List<LiveSubscription> members = new ArrayList<>();
        for (LiveMember member : live) {
            Set<String> subscribed = new HashSet<>();
            for (Uuid id : groupSpec.memberSubscription(member.memberId()).subscribedTopicIds()) {
                subscribed.add(names.getOrDefault(id, "topic id " + id));
            }
            // KIP-848: the target assignment may move a partition at once (the coordinator revokes it first).
            members.add(new LiveSubscription(member, subscribed, List.of()));
        }
        return Decision.decide(plan, name -> {
            // SubscribedTopicDescriber.numPartitions: -1 when no topic has the id (deleted, or created anew).
            int count = topics.numPartitions(Uuid.fromString(plan.topicIds().get(name)));
            return count < 0 ? null : count;
        }, members);
    }

    private static GroupAssignment assignment(Plan plan, Decision decision) {
        Map<String, MemberAssignment> members = new HashMap<>();
        decision.assignment().forEach((memberId, partitions) -> {
            Map<Uuid, Set<Integer>> byTopic = new HashMap<>();
            for (TopicPartition tp : partitions) {
                byTopic.computeIfAbsent(Uuid.fromString(plan.topicIds().get(tp.topic())), id -> new HashSet<>())
                    .add(tp.partition());
            }
            members.put(memberId, new MemberAssignmentImpl(byTopic));
        });
        return new GroupAssignment(members);
    }
}
