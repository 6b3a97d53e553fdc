package io.rebalanceplanner.apply;

import org.apache.kafka.common.TopicPartition;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.regex.Pattern;

/**
 * An exported plan, format rebalance-plan/1 (schemas/plan.schema.json): one approved generation of one group, checked
 * by the same rules as jobs/apply/plan_file.py parse_plan, in the same order, with the same messages.
 *
 * @param topics    partition count of every planned topic
 * @param topicIds  Kafka topic id of every planned topic, or empty when the snapshot did not know them
 * @param members   planned member id to planned member
 */
public record Plan(
    String groupId,
    int generationId,
    String strategy,
    String createdAt,
    Optional<String> snapshotId,
    Map<String, Integer> topics,
    Map<String, String> topicIds,
    Map<String, PlanMember> members
) {
    public static final String FORMAT = "rebalance-plan/1";

    // Kafka's Uuid.toString: 16 bytes, URL-safe base64 without padding
    private static final Pattern TOPIC_ID = Pattern.compile("^[A-Za-z0-9_-]{22}$");

    /**
     * One member of the planned group: who it is, what it subscribes to and what the plan gives it.
     *
     * @param topics      the subscribed topics, sorted
     * @param assignment  the planned partitions, sorted by topic then partition
     */
    public record PlanMember(
        String memberId,
        Optional<String> clientId,
        Optional<String> groupInstanceId,
        List<String> topics,
        List<TopicPartition> assignment
    ) { }

    /** Read and check a plan file; the exception names the file and what is wrong with it. */
    public static Plan load(Path path) throws PlanException {
        String source = "plan file " + path;
        byte[] bytes;
        try {
            bytes = Files.readAllBytes(path);
        } catch (NoSuchFileException e) {
            throw new PlanException(PlanException.PLAN_UNREADABLE, source + ": No such file or directory");
        } catch (IOException e) {
            throw new PlanException(PlanException.PLAN_UNREADABLE, source + ": " + e);
        }
        String text;
        try {
            text = StandardCharsets.UTF_8.newDecoder()
                .onMalformedInput(CodingErrorAction.REPORT)
                .onUnmappableCharacter(CodingErrorAction.REPORT)
                .decode(ByteBuffer.wrap(bytes))
                .toString();
        } catch (CharacterCodingException e) {
            throw new PlanException(PlanException.PLAN_UNREADABLE, source + ": not UTF-8 text");
        }
        return parse(text, source);
    }

    /** A plan file's content: JSON first, then the format's rules. */
    public static Plan parse(String text, String source) throws PlanException {
        Object doc;
        try {
            doc = Json.parse(text);
        } catch (Json.JsonException e) {
            throw new PlanException(source + ": invalid JSON: " + e.getMessage());
        }
        return parse(doc, source);
    }

    /** Check a plan document: every partition of {@code topics} is planned exactly once, to a subscribed member. */
    public static Plan parse(Object doc, String source) throws PlanException {
        Map<String, Object> obj = object(doc, source);
        if (!FORMAT.equals(obj.get("format"))) {
            throw new PlanException(PlanException.WRONG_FORMAT,
                source + ": format: expected " + Reasons.repr(FORMAT) + ", got " + Reasons.repr(obj.get("format")));
        }
        Map<String, Integer> topics = new TreeMap<>();
        for (Map.Entry<String, Object> e : object(obj.get("topics"), source + ": topics").entrySet()) {
            topics.put(e.getKey(), integer(e.getValue(), source + ": topics." + e.getKey(), 1));
        }
        Map<String, String> topicIds = topicIds(obj.get("topic_ids"), topics, source + ": topic_ids");
        Map<String, Object> membersDoc = object(obj.get("members"), source + ": members");
        if (membersDoc.isEmpty()) {
            throw new PlanException(source + ": members: the plan has no members");
        }
        Map<String, PlanMember> members = new LinkedHashMap<>();
        for (Map.Entry<String, Object> e : membersDoc.entrySet()) {
            members.put(e.getKey(), member(e.getKey(), e.getValue(), topics, source + ": members." + e.getKey()));
        }
        checkCoverage(members, topics, source);
        checkUniqueInstances(members, source);
        return new Plan(
            text(obj.get("group_id"), source + ": group_id"),
            integer(obj.get("generation_id"), source + ": generation_id", 1),
            text(obj.get("strategy"), source + ": strategy"),
            text(obj.get("created_at"), source + ": created_at"),
            optionalText(obj.get("snapshot_id"), source + ": snapshot_id"),
            Collections.unmodifiableMap(topics),
            topicIds,
            Collections.unmodifiableMap(members));
    }

    /** Planned member id of every partition. */
    public Map<TopicPartition, String> owners() {
        Map<TopicPartition, String> owners = new HashMap<>();
        for (PlanMember member : members.values()) {
            for (TopicPartition tp : member.assignment()) {
                owners.put(tp, member.memberId());
            }
        }
        return owners;
    }

    private static Map<String, String> topicIds(Object doc, Map<String, Integer> topics, String path)
        throws PlanException {
        if (doc == null) {
            return Map.of();
        }
        Map<String, String> ids = new TreeMap<>();
        for (Map.Entry<String, Object> e : object(doc, path).entrySet()) {
            ids.put(e.getKey(), text(e.getValue(), path + "." + e.getKey()));
        }
        if (!ids.keySet().equals(topics.keySet())) {
            throw new PlanException(path + ": expected the ids of exactly the plan's topics "
                + Reasons.repr(topics.keySet()) + ", got " + Reasons.repr(ids.keySet()));
        }
        for (Map.Entry<String, String> e : ids.entrySet()) {
            if (!TOPIC_ID.matcher(e.getValue()).matches()) {
                throw new PlanException(path + "." + e.getKey()
                    + ": expected a Kafka topic id (22 URL-safe base64 characters), got " + Reasons.repr(e.getValue()));
            }
        }
        if (new HashSet<>(ids.values()).size() != ids.size()) {
            throw new PlanException(path + ": two topics have the same id");
        }
        return Collections.unmodifiableMap(ids);
    }

    private static PlanMember member(String memberId, Object doc, Map<String, Integer> topics, String path)
        throws PlanException {
        Map<String, Object> obj = object(doc, path);
        if (!(obj.get("topics") instanceof List<?> list) || !list.stream().allMatch(t -> t instanceof String)) {
            throw new PlanException(path + ".topics: expected a list of topic names");
        }
        Set<String> subscribed = new TreeSet<>();
        list.forEach(t -> subscribed.add((String) t));
        Set<String> unknown = new TreeSet<>(subscribed);
        unknown.removeAll(topics.keySet());
        if (!unknown.isEmpty()) {
            throw new PlanException(path + ".topics: " + Reasons.repr(unknown) + " are not in the plan's topics "
                + Reasons.repr(topics.keySet()));
        }
        List<TopicPartition> assignment = new ArrayList<>();
        for (Map.Entry<String, Object> e : object(obj.get("assignment"), path + ".assignment").entrySet()) {
            String topic = e.getKey();
            if (!subscribed.contains(topic)) {
                throw new PlanException(path + ".assignment." + topic + ": the member does not subscribe to "
                    + Reasons.repr(topic));
            }
            if (!(e.getValue() instanceof List<?> partitions)) {
                throw new PlanException(path + ".assignment." + topic + ": expected a list of partitions");
            }
            for (int i = 0; i < partitions.size(); i++) {
                String at = path + ".assignment." + topic + "[" + i + "]";
                int partition = integer(partitions.get(i), at, 0);
                if (partition >= topics.get(topic)) {
                    throw new PlanException(at + ": partition " + partition + " out of range ("
                        + Reasons.repr(topic) + " has " + topics.get(topic) + " partitions)");
                }
                assignment.add(new TopicPartition(topic, partition));
            }
        }
        assignment.sort(Reasons.TOPIC_PARTITION_ORDER);
        return new PlanMember(
            memberId,
            optionalText(obj.get("client_id"), path + ".client_id"),
            optionalText(obj.get("group_instance_id"), path + ".group_instance_id"),
            List.copyOf(subscribed),
            List.copyOf(assignment));
    }

    /** Every partition of every planned topic has exactly one planned owner. */
    private static void checkCoverage(Map<String, PlanMember> members, Map<String, Integer> topics, String source)
        throws PlanException {
        Map<TopicPartition, String> owner = new HashMap<>();
        for (PlanMember m : members.values()) {
            for (TopicPartition tp : m.assignment()) {
                String other = owner.putIfAbsent(tp, m.memberId());
                if (other != null) {
                    throw new PlanException(source + ": members." + m.memberId() + ".assignment." + tp.topic()
                        + ": partition " + tp.partition() + " is also planned for " + Reasons.repr(other));
                }
            }
        }
        for (Map.Entry<String, Integer> e : topics.entrySet()) {
            List<Integer> missing = new ArrayList<>();
            for (int p = 0; p < e.getValue(); p++) {
                if (!owner.containsKey(new TopicPartition(e.getKey(), p))) {
                    missing.add(p);
                }
            }
            if (!missing.isEmpty()) {
                throw new PlanException(source + ": topics." + e.getKey() + ": partitions " + missing
                    + " are planned for no member");
            }
        }
    }

    private static void checkUniqueInstances(Map<String, PlanMember> members, String source) throws PlanException {
        Map<String, String> seen = new HashMap<>();
        for (PlanMember m : members.values()) {
            if (m.groupInstanceId().isEmpty()) {
                continue;
            }
            String other = seen.putIfAbsent(m.groupInstanceId().get(), m.memberId());
            if (other != null) {
                throw new PlanException(source + ": members." + m.memberId() + ".group_instance_id: "
                    + Reasons.repr(m.groupInstanceId().get()) + " is also the instance id of " + Reasons.repr(other));
            }
        }
    }

    @SuppressWarnings("unchecked")
    private static Map<String, Object> object(Object value, String path) throws PlanException {
        if (!(value instanceof Map)) {
            throw new PlanException(path + ": expected a JSON object");
        }
        return (Map<String, Object>) value;
    }

    private static String text(Object value, String path) throws PlanException {
        if (!(value instanceof String s) || s.isEmpty()) {
            throw new PlanException(path + ": expected a non-empty string");
        }
        return s;
    }

    private static Optional<String> optionalText(Object value, String path) throws PlanException {
        return value == null ? Optional.empty() : Optional.of(text(value, path));
    }

    private static int integer(Object value, String path, int minimum) throws PlanException {
        if (!(value instanceof Long n) || n < minimum || n > Integer.MAX_VALUE) {
            throw new PlanException(path + ": expected an integer >= " + minimum + ", got " + Reasons.repr(value));
        }
        return n.intValue();
    }
}
