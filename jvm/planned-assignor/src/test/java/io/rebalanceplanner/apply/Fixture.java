package io.rebalanceplanner.apply;

import org.apache.kafka.common.TopicPartition;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.stream.Stream;

/** One shared fixture of schemas/fixtures/apply (README there), read with the jar's own JSON reader. */
public record Fixture(String name, Map<String, Object> doc) {

    /** A live member of the fixture. */
    public record Member(String memberId, Optional<String> instanceId, String clientId, List<String> topics,
                         List<TopicPartition> owned) { }

    /** Every fixture file, in name order. */
    public static List<Fixture> all() {
        Path dir = Path.of(System.getProperty("fixtures.dir", "../../schemas/fixtures/apply"));
        try (Stream<Path> files = Files.list(dir)) {
            List<Fixture> fixtures = new ArrayList<>();
            for (Path file : files.filter(p -> p.toString().endsWith(".json")).sorted().toList()) {
                String name = file.getFileName().toString().replaceFirst("\\.json$", "");
                fixtures.add(new Fixture(name, map(Json.parse(Files.readString(file, StandardCharsets.UTF_8)))));
            }
            return fixtures;
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        } catch (Json.JsonException e) {
            throw new IllegalStateException(e);
        }
    }

    /** The plan file's content: the plan document written back as JSON, or the fixture's text that is not JSON. */
    public String planText() {
        return doc.containsKey("plan_text") ? (String) doc.get("plan_text") : toJson(doc.get("plan"));
    }

    public Map<String, Object> live() {
        return map(doc.get("live"));
    }

    public boolean cooperative() {
        return "cooperative".equals(live().get("protocol"));
    }

    public Map<String, Integer> topics() {
        Map<String, Integer> topics = new TreeMap<>();
        map(live().get("topics")).forEach((t, n) -> topics.put(t, ((Long) n).intValue()));
        return topics;
    }

    public Map<String, String> topicIds() {
        Map<String, String> ids = new TreeMap<>();
        map(live().get("topic_ids")).forEach((t, id) -> ids.put(t, (String) id));
        return ids;
    }

    public List<Member> members() {
        List<Member> members = new ArrayList<>();
        for (Object o : (List<?>) live().get("members")) {
            Map<String, Object> m = map(o);
            List<String> topics = ((List<?>) m.get("topics")).stream().map(String.class::cast).toList();
            List<TopicPartition> owned = m.containsKey("owned") ? partitions(map(m.get("owned"))) : List.of();
            members.add(new Member((String) m.get("member_id"), Optional.ofNullable((String) m.get("group_instance_id")),
                (String) m.get("client_id"), topics, owned));
        }
        return members;
    }

    /** The classic appliers' expectation. */
    public Map<String, Object> expected() {
        return map(doc.get("expected"));
    }

    /** The broker-side applier's expectation: {@code expected_broker} where it decides otherwise. */
    public Map<String, Object> expectedBroker() {
        return map(doc.getOrDefault("expected_broker", doc.get("expected")));
    }

    public static boolean serves(Map<String, Object> expected) {
        return "serve".equals(expected.get("decision"));
    }

    /** live member id to its expected partitions, sorted. */
    public static Map<String, List<TopicPartition>> assignment(Map<String, Object> expected) {
        Map<String, List<TopicPartition>> result = new TreeMap<>();
        map(expected.get("assignment")).forEach((member, topics) -> result.put(member, partitions(map(topics))));
        return result;
    }

    public static TreeSet<String> reasons(Map<String, Object> expected) {
        TreeSet<String> reasons = new TreeSet<>();
        ((List<?>) expected.get("reasons")).forEach(r -> reasons.add((String) r));
        return reasons;
    }

    public static List<TopicPartition> partitions(Map<String, Object> byTopic) {
        List<TopicPartition> result = new ArrayList<>();
        byTopic.forEach((topic, ps) -> ((List<?>) ps).forEach(p -> result.add(new TopicPartition(topic, ((Long) p).intValue()))));
        result.sort(Reasons.TOPIC_PARTITION_ORDER);
        return result;
    }

    @SuppressWarnings("unchecked")
    public static Map<String, Object> map(Object o) {
        return (Map<String, Object>) o;
    }

    /** A JSON writer for the values the reader returns (enough to write a fixture's plan back to a file). */
    public static String toJson(Object value) {
        if (value == null) {
            return "null";
        }
        if (value instanceof String s) {
            return "\"" + s.replace("\\", "\\\\").replace("\"", "\\\"") + "\"";
        }
        if (value instanceof Map<?, ?> m) {
            List<String> entries = new ArrayList<>();
            m.forEach((k, v) -> entries.add(toJson(k) + ": " + toJson(v)));
            return "{" + String.join(", ", entries) + "}";
        }
        if (value instanceof List<?> l) {
            return "[" + String.join(", ", l.stream().map(Fixture::toJson).toList()) + "]";
        }
        return String.valueOf(value);
    }

    @Override
    public String toString() {
        return name;
    }
}
