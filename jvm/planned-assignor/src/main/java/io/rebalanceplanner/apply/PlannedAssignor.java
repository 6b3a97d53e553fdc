package io.rebalanceplanner.apply;

import io.rebalanceplanner.apply.Decision.LiveSubscription;
import io.rebalanceplanner.apply.Matching.LiveMember;

import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor;
import org.apache.kafka.clients.consumer.CooperativeStickyAssignor;
import org.apache.kafka.common.Cluster;
import org.apache.kafka.common.Configurable;
import org.apache.kafka.common.config.ConfigException;
import org.apache.kafka.common.utils.Utils;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.nio.ByteBuffer;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * A classic group's assignor that serves an approved plan ({@code rebalance export}), else delegates to a Kafka
 * assignor: the Java twin of jobs/apply/planned_assignor.py, with the same rules ({@link Decision#decide}).
 *
 * <pre>
 * partition.assignment.strategy=io.rebalanceplanner.apply.PlannedAssignor
 * rebalance.plan.path=/etc/payments/payments.plan.json
 * rebalance.plan.fallback=org.apache.kafka.clients.consumer.CooperativeStickyAssignor   (the default)
 * </pre>
 *
 * <p>Kafka elects the group's assignor among those every member lists (ClassicGroup.selectProtocol), and the leader's
 * ConsumerCoordinator calls {@link #assign}. The plan file is read again whenever it changed, so an operator can drop
 * a newly approved plan in place. The plan is served when it checks, every planned topic has the planned partition
 * count, the live members are exactly the planned ones (static members by group.instance.id, then member id, then a
 * unique client id) and each subscribes to exactly its planned topics. Otherwise ONE warning names every reason and the
 * fallback assigns.
 *
 * <p>Rebalance protocol: the assignor supports exactly its fallback's protocols (the default fallback,
 * CooperativeStickyAssignor, supports EAGER and COOPERATIVE), since a consumer's protocol is the highest one all its
 * assignors support (ConsumerCoordinator's constructor) and the fallback must be able to assign under it. Under
 * COOPERATIVE a plan is served in two phases (KIP-429, as CooperativeStickyAssignor.adjustAssignment does): a
 * partition another member still owns is withheld from its planned owner; the owner revokes it, rejoins, and the
 * follow-up rebalance gives it. {@link #subscriptionUserData} and {@link #onAssignment} are the fallback's, so the
 * fallback always has the state it needs (generation, owned partitions).
 */
public class PlannedAssignor implements ConsumerPartitionAssignor, Configurable {
    public static final String NAME = "rebalance-planned";
    public static final String PLAN_PATH_CONFIG = "rebalance.plan.path";
    public static final String FALLBACK_CONFIG = "rebalance.plan.fallback";
    public static final String FALLBACK_DEFAULT = CooperativeStickyAssignor.class.getName();

    private static final Logger log = LoggerFactory.getLogger(PlannedAssignor.class);

    private ConsumerPartitionAssignor fallback = new CooperativeStickyAssignor();
    private PlanFile planFile;

    /**
     * Reads {@value #PLAN_PATH_CONFIG} (required) and {@value #FALLBACK_CONFIG} from the consumer's properties; a
     * Configurable fallback is configured with the same properties.
     */
    @Override
    public void configure(Map<String, ?> configs) {
        Object path = configs.get(PLAN_PATH_CONFIG);
        if (!(path instanceof String p) || p.isBlank()) {
            throw new ConfigException(PLAN_PATH_CONFIG, path, "the path of the plan file (rebalance export) to serve");
        }
        Object className = configs.get(FALLBACK_CONFIG);
        String fallbackClass = className == null ? FALLBACK_DEFAULT : className.toString().trim();
        ConsumerPartitionAssignor instance;
        try {
            instance = Utils.newInstance(fallbackClass, ConsumerPartitionAssignor.class);
        } catch (ClassNotFoundException | RuntimeException e) {
            throw new ConfigException(FALLBACK_CONFIG, fallbackClass, "not a ConsumerPartitionAssignor: " + e);
        }
        if (instance instanceof PlannedAssignor) {
            throw new ConfigException(FALLBACK_CONFIG, fallbackClass, "the fallback must be another assignor");
        }
        if (instance instanceof Configurable configurable) {
            configurable.configure(configs);
        }
        this.fallback = instance;
        this.planFile = new PlanFile(Path.of(p));
    }

    public ConsumerPartitionAssignor fallback() {
        return fallback;
    }

    @Override
    public String name() {
        return NAME;
    }

    @Override
    public List<RebalanceProtocol> supportedProtocols() {
        return fallback.supportedProtocols();
    }

    @Override
    public short version() {
        return fallback.version();
    }

    @Override
    public ByteBuffer subscriptionUserData(Set<String> topics) {
        return fallback.subscriptionUserData(topics);
    }

    @Override
    public void onAssignment(Assignment assignment, ConsumerGroupMetadata metadata) {
        fallback.onAssignment(assignment, metadata);
    }

    /** The plan's assignment when the group matches it, else the fallback's (with one warning saying why). */
    @Override
    public GroupAssignment assign(Cluster metadata, GroupSubscription groupSubscription) {
        if (planFile == null) {
            throw new IllegalStateException(NAME + " assignor used before configure(): set " + PLAN_PATH_CONFIG);
        }
        Plan plan;
        try {
            plan = planFile.read();
        } catch (PlanException e) {
            log.warn("planned assignor: no plan served ({}); assigning with {}", e.getMessage(), fallback.name());
            return fallback.assign(metadata, groupSubscription);
        }
        List<LiveSubscription> members = new ArrayList<>();
        groupSubscription.groupSubscription().forEach((memberId, s) -> members.add(subscription(memberId, s)));
        Decision decision = Decision.decide(plan, metadata::partitionCountForTopic, members);
        if (!decision.serve()) {
            log.warn("planned assignor: plan of group {} generation {} not served ({}); assigning with {}",
                Reasons.repr(plan.groupId()), plan.generationId(), decision.reasonText(), fallback.name());
            return fallback.assign(metadata, groupSubscription);
        }
        log.info("planned assignor: serving plan of group {} generation {} ({}) to {} members{}",
            Reasons.repr(plan.groupId()), plan.generationId(), plan.strategy(), members.size(),
            decision.withheld() > 0
                ? "; " + decision.withheld() + " partitions wait for their owners to revoke them (KIP-429)"
                : "");
        Map<String, Assignment> assignments = new LinkedHashMap<>();
        decision.assignment().forEach((memberId, partitions) -> assignments.put(memberId, new Assignment(partitions)));
        return new GroupAssignment(assignments);
    }

    /**
     * A JoinGroup member as {@link Decision#decide} sees it: the leader knows a dynamic member's client id from its
     * member id only, and what it owns from its subscription (v1+, KIP-429; nothing under EAGER).
     */
    static LiveSubscription subscription(String memberId, Subscription subscription) {
        LiveMember member = new LiveMember(memberId, subscription.groupInstanceId(), Matching.clientIdOf(memberId));
        return new LiveSubscription(member, subscription.topics(), subscription.ownedPartitions());
    }
}
