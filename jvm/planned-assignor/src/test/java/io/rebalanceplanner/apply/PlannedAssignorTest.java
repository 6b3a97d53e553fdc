package io.rebalanceplanner.apply;

import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor;
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor.GroupAssignment;
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor.GroupSubscription;
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor.RebalanceProtocol;
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor.Subscription;
import org.apache.kafka.clients.consumer.CooperativeStickyAssignor;
import org.apache.kafka.clients.consumer.RangeAssignor;
import org.apache.kafka.clients.consumer.RoundRobinAssignor;
import org.apache.kafka.common.Cluster;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigException;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeMap;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The classic group's PlannedAssignor on every shared fixture, then its file reading, configuration and KIP-429 rounds. */
class PlannedAssignorTest {
    private static final Node NODE = new Node(0, "127.0.0.1", 9092);

    @TempDir
    Path dir;

    static List<Fixture> fixtures() {
        return Fixture.all();
    }

    @Test
    void theSharedFixturesAreThere() {
        assertTrue(fixtures().size() >= 12, "fixtures in " + System.getProperty("fixtures.dir"));
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("fixtures")
    void aFixtureGetsTheExpectedDecision(Fixture fixture) throws IOException {
        ConsumerPartitionAssignor fallback = fixture.cooperative() ? new CooperativeStickyAssignor() : new RoundRobinAssignor();
        PlannedAssignor assignor = assignor(write("plan.json", fixture.planText()), fallback.getClass().getName());
        Cluster cluster = cluster(fixture.topics());
        GroupSubscription group = group(fixture);

        LogCapture.Captured<GroupAssignment> run = LogCapture.capture(() -> assignor.assign(cluster, group));

        Map<String, Object> expected = fixture.expected();
        List<String> lines = run.assignorLines();
        assertEquals(1, lines.size(), "one log line: " + run.lines());
        if (Fixture.serves(expected)) {
            assertEquals(Fixture.assignment(expected), partitions(run.result()));
            assertTrue(lines.get(0).contains("INFO") && lines.get(0).contains("serving plan of group 'payments'"), lines.get(0));
            long withheld = (Long) expected.get("withheld");
            assertEquals(withheld > 0, lines.get(0).contains(withheld + " partitions wait for their owners"), lines.get(0));
        } else {
            assertEquals(partitions(fallback.assign(cluster, group)), partitions(run.result()));
            String line = lines.get(0);
            assertTrue(line.contains("WARN") && line.endsWith("assigning with " + fallback.name()), line);
            for (String code : Fixture.reasons(expected)) {
                assertTrue(line.contains(WORDS.get(code)), code + " in " + line);
            }
        }
    }

    /** The words each reason code is logged with (the Python assignor's words). */
    private static final Map<String, String> WORDS = Map.of(
        "malformed_plan", "no plan served (plan file ",
        "wrong_format", "format: expected 'rebalance-plan/1', got 'rebalance-plan/2'",
        "topic_missing", "no partition metadata for topic 'refunds'",
        "partition_count_changed", "partition count of 'orders' changed: planned 6, now 8",
        "unknown_member", "is not in the plan",
        "missing_member", "is missing",
        "subscription_changed", "differs: planned ['orders', 'refunds'], now ['orders']");

    @Test
    void thePlanFileIsReadAgainWhenItChanges() throws IOException {
        Fixture same = byName("01-serve-same-member-ids");
        Path path = dir.resolve("payments.plan.json");
        PlannedAssignor assignor = assignor(path, RangeAssignor.class.getName());
        Cluster cluster = cluster(same.topics());
        GroupSubscription group = group(same);
        RangeAssignor range = new RangeAssignor();

        var missing = LogCapture.capture(() -> assignor.assign(cluster, group));
        assertEquals(partitions(range.assign(cluster, group)), partitions(missing.result()));
        assertTrue(missing.assignorLines().get(0).contains("no plan served (plan file " + path + ": No such file or directory)"));

        Files.writeString(path, same.planText());
        assertEquals(Fixture.assignment(same.expected()), partitions(assignor.assign(cluster, group)));

        // A newer plan: c-0 takes orders-3 from c-2. Written under another name and renamed, as export does.
        String newer = same.planText()
            .replace("\"generation_id\": 4", "\"generation_id\": 5")
            .replace("\"orders\": [4, 5]", "\"orders\": [3, 4, 5]")
            .replace("\"orders\": [3], \"refunds\": [0]", "\"refunds\": [0]");
        assertNotEquals(same.planText(), newer);
        Path temporary = dir.resolve(".payments.plan.json.tmp-1");
        Files.writeString(temporary, newer);
        Files.move(temporary, path, java.nio.file.StandardCopyOption.REPLACE_EXISTING, java.nio.file.StandardCopyOption.ATOMIC_MOVE);
        var served = LogCapture.capture(() -> assignor.assign(cluster, group));
        assertTrue(served.assignorLines().get(0).contains("generation 5"), served.lines().toString());
        assertEquals(List.of(new TopicPartition("orders", 3), new TopicPartition("orders", 4),
            new TopicPartition("orders", 5), new TopicPartition("refunds", 1)),
            partitions(served.result()).get("c-0-5b1f4f7e-3c1d-4b8a-9f61-0d7c2a4e9b10"));

        Files.writeString(path, "{not json");
        var broken = LogCapture.capture(() -> assignor.assign(cluster, group));
        assertEquals(partitions(range.assign(cluster, group)), partitions(broken.result()));
        assertTrue(broken.assignorLines().get(0).contains("plan file " + path + ": invalid JSON: "), broken.lines().toString());
    }

    @Test
    void theConsumerPropertiesConfigureItAndItSupportsItsFallbacksProtocols() {
        PlannedAssignor byDefault = new PlannedAssignor();
        byDefault.configure(Map.of(PlannedAssignor.PLAN_PATH_CONFIG, "/nonexistent/plan.json"));
        assertEquals(CooperativeStickyAssignor.class, byDefault.fallback().getClass());
        assertEquals(new CooperativeStickyAssignor().supportedProtocols(), byDefault.supportedProtocols());
        assertEquals(Set.of(RebalanceProtocol.EAGER, RebalanceProtocol.COOPERATIVE), Set.copyOf(byDefault.supportedProtocols()));
        assertEquals("rebalance-planned", byDefault.name());

        PlannedAssignor eager = assignor(Path.of("/nonexistent/plan.json"), RangeAssignor.class.getName());
        assertEquals(List.of(RebalanceProtocol.EAGER), eager.supportedProtocols());

        assertThrows(ConfigException.class, () -> new PlannedAssignor().configure(Map.of()));
        assertThrows(ConfigException.class, () -> new PlannedAssignor().configure(Map.of(
            PlannedAssignor.PLAN_PATH_CONFIG, "p.json", PlannedAssignor.FALLBACK_CONFIG, "no.such.Assignor")));
        assertThrows(ConfigException.class, () -> new PlannedAssignor().configure(Map.of(
            PlannedAssignor.PLAN_PATH_CONFIG, "p.json", PlannedAssignor.FALLBACK_CONFIG, PlannedAssignor.class.getName())));
        // Kafka's own lookup: the consumer builds its assignors with getAssignorInstances and configures them.
        List<ConsumerPartitionAssignor> built = ConsumerPartitionAssignor.getAssignorInstances(
            List.of(PlannedAssignor.class.getName()), Map.of(PlannedAssignor.PLAN_PATH_CONFIG, "p.json"));
        assertEquals(PlannedAssignor.class, built.get(0).getClass());
    }

    /**
     * KIP-429 from any starting ownership: each round is what ConsumerCoordinator.validateCooperativeAssignment accepts
     * (no partition given to a member while another revokes it), and the plan lands whole in the round after.
     */
    @Test
    void aCooperativePlanRevokesBeforeItMovesThenCompletes() throws IOException {
        Fixture fixture = byName("11-serve-cooperative-first-round");
        PlannedAssignor assignor = assignor(write("plan.json", fixture.planText()), CooperativeStickyAssignor.class.getName());
        Cluster cluster = cluster(fixture.topics());
        Map<String, List<TopicPartition>> full = Fixture.assignment(byName("01-serve-same-member-ids").expected());
        List<String> members = new ArrayList<>(full.keySet());
        List<TopicPartition> all = full.values().stream().flatMap(List::stream).sorted(Reasons.TOPIC_PARTITION_ORDER).toList();
        java.util.Random random = new java.util.Random(19);
        for (int trial = 0; trial < 200; trial++) {
            Map<String, List<TopicPartition>> owned = new TreeMap<>();
            members.forEach(m -> owned.put(m, new ArrayList<>()));
            for (TopicPartition tp : all) {
                int owner = random.nextInt(members.size() + 1);  // members.size(): nobody owns it
                if (owner < members.size()) {
                    owned.get(members.get(owner)).add(tp);
                }
            }
            Map<String, List<TopicPartition>> first = partitions(assignor.assign(cluster, cooperative(fixture, owned)));
            assertValidCooperativeRound(owned, first);
            Map<String, List<TopicPartition>> second = partitions(assignor.assign(cluster, cooperative(fixture, first)));
            assertValidCooperativeRound(first, second);
            assertEquals(full, second, "after round 1 from " + owned);
        }
    }

    /** Kafka: ConsumerCoordinator.validateCooperativeAssignment. */
    private static void assertValidCooperativeRound(Map<String, List<TopicPartition>> owned,
                                                    Map<String, List<TopicPartition>> assigned) {
        Set<TopicPartition> added = new HashSet<>();
        Set<TopicPartition> revoked = new HashSet<>();
        for (String member : assigned.keySet()) {
            Set<TopicPartition> now = new HashSet<>(assigned.get(member));
            Set<TopicPartition> before = new HashSet<>(owned.getOrDefault(member, List.of()));
            now.stream().filter(tp -> !before.contains(tp)).forEach(added::add);
            before.stream().filter(tp -> !now.contains(tp)).forEach(revoked::add);
        }
        added.retainAll(revoked);
        assertEquals(Set.of(), added, "partitions given while their owner revokes them");
    }

    private static GroupSubscription cooperative(Fixture fixture, Map<String, List<TopicPartition>> owned) {
        Map<String, Subscription> members = new LinkedHashMap<>();
        for (Fixture.Member m : fixture.members()) {
            members.put(m.memberId(), new Subscription(m.topics(), null, owned.get(m.memberId()), 1, Optional.empty()));
        }
        return new GroupSubscription(members);
    }

    static Fixture byName(String name) {
        return fixtures().stream().filter(f -> f.name().equals(name)).findFirst().orElseThrow();
    }

    private Path write(String name, String text) throws IOException {
        return Files.writeString(dir.resolve(name), text, StandardCharsets.UTF_8);
    }

    private static PlannedAssignor assignor(Path plan, String fallback) {
        PlannedAssignor assignor = new PlannedAssignor();
        assignor.configure(Map.of(PlannedAssignor.PLAN_PATH_CONFIG, plan.toString(), PlannedAssignor.FALLBACK_CONFIG, fallback));
        return assignor;
    }

    /** Cluster metadata with the fixture's topics now. */
    static Cluster cluster(Map<String, Integer> topics) {
        List<PartitionInfo> partitions = new ArrayList<>();
        topics.forEach((topic, count) -> {
            for (int p = 0; p < count; p++) {
                partitions.add(new PartitionInfo(topic, p, NODE, new Node[]{NODE}, new Node[]{NODE}));
            }
        });
        return new Cluster("test", List.of(NODE), partitions, Set.of(), Set.of());
    }

    /** The JoinGroup members as the leader decodes them: topics, owned partitions (v1+), group.instance.id. */
    static GroupSubscription group(Fixture fixture) {
        Map<String, Subscription> members = new LinkedHashMap<>();
        for (Fixture.Member m : fixture.members()) {
            Subscription s = new Subscription(m.topics(), null, m.owned(), 1, Optional.empty());
            s.setGroupInstanceId(m.instanceId());
            members.put(m.memberId(), s);
        }
        return new GroupSubscription(members);
    }

    static Map<String, List<TopicPartition>> partitions(GroupAssignment assignment) {
        Map<String, List<TopicPartition>> result = new TreeMap<>();
        assignment.groupAssignment().forEach((member, a) -> {
            List<TopicPartition> sorted = new ArrayList<>(a.partitions());
            sorted.sort(Reasons.TOPIC_PARTITION_ORDER);
            result.put(member, sorted);
        });
        return result;
    }

}
