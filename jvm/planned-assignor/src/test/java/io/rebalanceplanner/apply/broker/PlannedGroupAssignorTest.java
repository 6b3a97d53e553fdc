package io.rebalanceplanner.apply.broker;

import io.rebalanceplanner.apply.Fixture;
import io.rebalanceplanner.apply.LogCapture;
import io.rebalanceplanner.apply.Reasons;

import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.coordinator.group.api.assignor.GroupAssignment;
import org.apache.kafka.coordinator.group.api.assignor.GroupSpec;
import org.apache.kafka.coordinator.group.api.assignor.SubscribedTopicDescriber;
import org.apache.kafka.coordinator.group.api.assignor.SubscriptionType;
import org.apache.kafka.coordinator.group.assignor.UniformAssignor;
import org.apache.kafka.coordinator.group.modern.Assignment;
import org.apache.kafka.coordinator.group.modern.GroupSpecImpl;
import org.apache.kafka.coordinator.group.modern.MemberSubscriptionAndAssignmentImpl;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeMap;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The KIP-848 broker-side assignor on every shared fixture, with the coordinator's own GroupSpec, then its directory. */
class PlannedGroupAssignorTest {
    @TempDir
    Path dir;

    static List<Fixture> fixtures() {
        return Fixture.all();
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("fixtures")
    void aFixtureGetsTheExpectedDecision(Fixture fixture) throws IOException {
        Files.writeString(dir.resolve("payments.plan.json"), fixture.planText());
        PlannedGroupAssignor assignor = assignor(dir);
        GroupSpec spec = spec(fixture);
        Describer topics = new Describer(fixture);

        LogCapture.Captured<GroupAssignment> run = LogCapture.capture(() -> assignor.assign(spec, topics));

        Map<String, Object> expected = fixture.expectedBroker();
        List<String> lines = run.assignorLines();
        if (Fixture.serves(expected)) {
            assertEquals(1, lines.size(), "one log line: " + run.lines());
            assertEquals(0L, expected.get("withheld"), "KIP-848 withholds nothing: the coordinator revokes first");
            assertEquals(Fixture.assignment(expected), names(run.result(), fixture));
            assertTrue(lines.get(0).contains("INFO") && lines.get(0).contains("serving plan of group 'payments'"), lines.get(0));
            return;
        }
        assertEquals(new UniformAssignor().assign(spec, topics), run.result(), "assigned exactly as uniform");
        assertEquals(Fixture.reasons(expected), assignor.choose(spec, topics).decision().reasonCodes());
        Set<String> planRefused = Set.of("malformed_plan", "wrong_format");
        boolean unreadable = !Fixture.serves(fixture.expected()) && planRefused.containsAll(Fixture.reasons(fixture.expected()));
        if (unreadable) {
            // The file is ignored with one line; then no plan names a member.
            assertEquals(1, lines.size(), "one log line: " + run.lines());
            assertTrue(lines.get(0).contains("WARN") && lines.get(0).contains("plan file ignored ("), lines.get(0));
        } else if (Fixture.reasons(expected).contains(PlannedGroupAssignor.NO_MATCHING_PLAN)) {
            // Most groups have no plan: a group no plan recognises is assigned as uniform without a word.
            assertEquals(List.of(), lines);
        } else {
            assertEquals(1, lines.size(), "one log line: " + run.lines());
            assertTrue(lines.get(0).contains("WARN") && lines.get(0).endsWith("assigning with uniform"), lines.get(0));
        }
    }

    @Test
    void aChangedPlanIsServedAtTheNextAssignmentAndABrokenOneIsIgnoredWithOneLine() throws IOException {
        Fixture fixture = fixture("01-serve-same-member-ids");
        GroupSpec spec = spec(fixture);
        Describer topics = new Describer(fixture);
        PlannedGroupAssignor assignor = assignor(dir);
        GroupAssignment uniform = new UniformAssignor().assign(spec, topics);
        assertEquals(uniform, assignor.assign(spec, topics));  // an empty directory: uniform

        Path path = dir.resolve("payments.plan.json");
        Files.writeString(path, fixture.planText());
        assertEquals(Fixture.assignment(fixture.expected()), names(assignor.assign(spec, topics), fixture));

        String newer = fixture.planText().replace("\"generation_id\": 4", "\"generation_id\": 5")
            .replace("\"orders\": [4, 5]", "\"orders\": [3, 4, 5]")
            .replace("\"orders\": [3], \"refunds\": [0]", "\"refunds\": [0]");
        Path temporary = dir.resolve(".payments.plan.json.tmp-7");  // hidden: never read half-written
        Files.writeString(temporary, "{\"format\": ");
        assertEquals(Fixture.assignment(fixture.expected()), names(assignor.assign(spec, topics), fixture));
        Files.writeString(temporary, newer);
        Files.move(temporary, path, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
        Map<String, List<TopicPartition>> served = names(assignor.assign(spec, topics), fixture);
        assertEquals(4, served.get("c-0-5b1f4f7e-3c1d-4b8a-9f61-0d7c2a4e9b10").size());

        Files.writeString(path, "{\"format\": \"rebalance-plan/1\"");
        var first = LogCapture.capture(() -> assignor.assign(spec, topics));
        var second = LogCapture.capture(() -> assignor.assign(spec, topics));
        assertEquals(uniform, first.result());
        assertEquals(uniform, second.result());
        assertEquals(1, first.assignorLines().size(), first.lines().toString());
        assertTrue(first.assignorLines().get(0).contains("plan file ignored (malformed_plan: plan file " + path + ": invalid JSON"));
        assertEquals(List.of(), second.assignorLines(), "logged once, not at every assignment");
    }

    @Test
    void aGroupIsRecognisedAmongOtherGroupsPlansAndTwoFittingPlansAreAmbiguous() throws IOException {
        Fixture payments = fixture("01-serve-same-member-ids");
        Fixture statics = fixture("03-serve-static-by-instance-id");
        Files.writeString(dir.resolve("payments.plan.json"), payments.planText());
        Files.writeString(dir.resolve("static.plan.json"), statics.planText());
        PlannedGroupAssignor assignor = assignor(dir);
        assertEquals(Fixture.assignment(payments.expected()), names(assignor.assign(spec(payments), new Describer(payments)), payments));
        assertEquals(Fixture.assignment(statics.expected()), names(assignor.assign(spec(statics), new Describer(statics)), statics));

        Files.writeString(dir.resolve("payments-copy.plan.json"), payments.planText().replace("\"generation_id\": 4", "\"generation_id\": 3"));
        var run = LogCapture.capture(() -> assignor.assign(spec(payments), new Describer(payments)));
        assertEquals(new UniformAssignor().assign(spec(payments), new Describer(payments)), run.result());
        assertTrue(run.assignorLines().get(0).contains("all fit the group"), run.lines().toString());
        assertEquals(Set.of(PlannedGroupAssignor.AMBIGUOUS_PLAN),
            assignor.choose(spec(payments), new Describer(payments)).decision().reasonCodes());
    }

    @Test
    void withoutAPlanDirectoryEveryGroupIsAssignedAsUniform() {
        Fixture fixture = fixture("01-serve-same-member-ids");
        PlannedGroupAssignor assignor = new PlannedGroupAssignor();
        var configured = LogCapture.capture(() -> {
            assignor.configure(Map.of("broker.id", "1"));
            return assignor;
        });
        if (System.getenv(PlannedGroupAssignor.PLAN_DIR_ENV) == null) {
            assertTrue(configured.assignorLines().get(0).contains("no plan directory"), configured.lines().toString());
        }
        assertEquals(new UniformAssignor().assign(spec(fixture), new Describer(fixture)),
            assignor.assign(spec(fixture), new Describer(fixture)));
        assertEquals("rebalance-planned", assignor.name());
    }

    @Test
    void aPlanNeverBreaksAGroupEvenWhenItsFileVanishesMidway() throws IOException {
        Fixture fixture = fixture("01-serve-same-member-ids");
        Files.writeString(dir.resolve("payments.plan.json"), fixture.planText());
        PlannedGroupAssignor assignor = assignor(dir.resolve("no-such-dir"));
        var run = LogCapture.capture(() -> assignor.assign(spec(fixture), new Describer(fixture)));
        assertEquals(new UniformAssignor().assign(spec(fixture), new Describer(fixture)), run.result());
        assertTrue(run.assignorLines().stream().anyMatch(l -> l.contains("not readable")), run.lines().toString());
        assertNotEquals(0, run.result().members().size());
    }

    static Fixture fixture(String name) {
        return Fixture.all().stream().filter(f -> f.name().equals(name)).findFirst().orElseThrow();
    }

    private static PlannedGroupAssignor assignor(Path directory) {
        PlannedGroupAssignor assignor = new PlannedGroupAssignor();
        LogCapture.capture(() -> {
            assignor.configure(Map.of(PlannedGroupAssignor.PLAN_DIR_CONFIG, directory.toString()));
            return null;
        });
        return assignor;
    }

    /**
     * The group as the coordinator hands it to an assignor (GroupSpecImpl): members with their instance id and
     * subscribed topic ids (a KIP-848 subscription holds existing topics only) and what they own now.
     */
    static GroupSpec spec(Fixture fixture) {
        Map<String, String> ids = fixture.topicIds();
        Map<String, MemberSubscriptionAndAssignmentImpl> members = new HashMap<>();
        Map<Uuid, Map<Integer, String>> owners = new HashMap<>();
        Set<Set<Uuid>> subscriptions = new HashSet<>();
        for (Fixture.Member m : fixture.members()) {
            Set<Uuid> subscribed = new HashSet<>();
            m.topics().stream().filter(ids::containsKey).forEach(t -> subscribed.add(Uuid.fromString(ids.get(t))));
            subscriptions.add(subscribed);
            Map<Uuid, Set<Integer>> owned = new HashMap<>();
            for (TopicPartition tp : m.owned()) {
                Uuid id = Uuid.fromString(ids.get(tp.topic()));
                owned.computeIfAbsent(id, k -> new HashSet<>()).add(tp.partition());
                owners.computeIfAbsent(id, k -> new HashMap<>()).put(tp.partition(), m.memberId());
            }
            members.put(m.memberId(), new MemberSubscriptionAndAssignmentImpl(
                Optional.empty(), m.instanceId(), subscribed, new Assignment(owned)));
        }
        SubscriptionType type = subscriptions.size() <= 1 ? SubscriptionType.HOMOGENEOUS : SubscriptionType.HETEROGENEOUS;
        return new GroupSpecImpl(members, type, owners);
    }

    /** The cluster's topics now, by id: -1 partitions for an id no topic has (Kafka's SubscribedTopicDescriberImpl). */
    record Describer(Map<Uuid, Integer> counts) implements SubscribedTopicDescriber {
        Describer(Fixture fixture) {
            this(counts(fixture));
        }

        private static Map<Uuid, Integer> counts(Fixture fixture) {
            Map<Uuid, Integer> counts = new HashMap<>();
            fixture.topicIds().forEach((topic, id) -> {
                if (fixture.topics().containsKey(topic)) {
                    counts.put(Uuid.fromString(id), fixture.topics().get(topic));
                }
            });
            return counts;
        }

        @Override
        public int numPartitions(Uuid topicId) {
            return counts.getOrDefault(topicId, -1);
        }

        @Override
        public Set<String> racksForPartition(Uuid topicId, int partition) {
            return Set.of();
        }
    }

    /** The assignment by topic name (the fixture's live topic ids), sorted. */
    static Map<String, List<TopicPartition>> names(GroupAssignment assignment, Fixture fixture) {
        Map<Uuid, String> names = new HashMap<>();
        fixture.topicIds().forEach((topic, id) -> names.put(Uuid.fromString(id), topic));
        Map<String, List<TopicPartition>> result = new TreeMap<>();
        assignment.members().forEach((member, a) -> {
            List<TopicPartition> partitions = new ArrayList<>();
            a.partitions().forEach((id, ps) -> ps.forEach(p -> partitions.add(new TopicPartition(names.get(id), p))));
            partitions.sort(Reasons.TOPIC_PARTITION_ORDER);
            result.put(member, partitions);
        });
        return result;
    }
}
