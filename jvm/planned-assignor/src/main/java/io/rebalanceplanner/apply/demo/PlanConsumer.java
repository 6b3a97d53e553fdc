package io.rebalanceplanner.apply.demo;

import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

import java.io.FileInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.stream.Collectors;

/**
 * A Java consumer application for the live tests and the demo (the demo jar, not the consumer's): it subscribes with the
 * consumer properties it is given (PlannedAssignor's among them), and reports on stdout, one JSON object a line:
 *
 * <pre>
 * {"event":"assigned"|"revoked"|"lost","partitions":[["orders",0],...],"generation":7,"member_id":"..."}  (listener)
 * {"event":"assignment","partitions":[...],"generation":7,"member_id":"..."}  the whole assignment, when it changed
 * {"event":"records","topic":"orders","partition":3,"offsets":[40,41,42]}     what one poll returned, per partition
 * {"event":"commit_failed","error":"..."}                                        a commit that did not happen
 * {"event":"closed"}                                                             after the consumer closed
 * </pre>
 *
 * <p>Every record is reported before its offset is committed, and offsets are committed synchronously after each poll
 * and, for partitions being revoked, in onPartitionsRevoked: a partition moves to another member with everything this
 * one consumed committed, so across a cooperative rebalance no record is consumed twice. It stops cleanly (commits,
 * closes, says "closed") when its stdin closes or on SIGTERM.
 *
 * <pre>
 * java -cp 'kafka/lib/*:planned-assignor-1.0.0.jar:planned-assignor-1.0.0-demo.jar' \
 *     io.rebalanceplanner.apply.demo.PlanConsumer consumer.properties orders,refunds
 * </pre>
 */
public final class PlanConsumer {
    private final PrintStream out;
    private final KafkaConsumer<byte[], byte[]> consumer;
    private final Map<TopicPartition, OffsetAndMetadata> uncommitted = new HashMap<>();
    private Set<TopicPartition> reported = Set.of();
    private volatile boolean running = true;

    private PlanConsumer(Properties props, PrintStream out) {
        this.out = out;
        this.consumer = new KafkaConsumer<>(props, new ByteArrayDeserializer(), new ByteArrayDeserializer());
    }

    public static void main(String[] args) throws IOException, InterruptedException {
        if (args.length != 2) {
            System.err.println("usage: PlanConsumer <consumer.properties> <topic>[,<topic>...]");
            System.exit(2);
        }
        Properties props = new Properties();
        try (InputStream in = new FileInputStream(args[0])) {
            props.load(in);
        }
        props.putIfAbsent("enable.auto.commit", "false");
        props.putIfAbsent("auto.offset.reset", "earliest");
        List<String> topics = List.of(args[1].split(","));
        PrintStream out = new PrintStream(System.out, false, StandardCharsets.UTF_8);
        PlanConsumer app = new PlanConsumer(props, out);
        Thread main = Thread.currentThread();
        Thread stdin = new Thread(() -> {
            try {
                while (System.in.read() >= 0) {
                    // only the end of stdin matters
                }
            } catch (IOException e) {
                // closed: stop as well
            }
            app.stop();
        }, "stdin-watch");
        stdin.setDaemon(true);
        stdin.start();
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            app.stop();
            try {
                main.join(30_000);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }, "sigterm"));
        app.run(topics);
    }

    /** Stop once (stdin's end and SIGTERM may both ask): the poll or commit in progress ends with a wakeup. */
    synchronized void stop() {
        if (running) {
            running = false;
            consumer.wakeup();
        }
    }

    private void run(List<String> topics) {
        try {
            consumer.subscribe(topics, new Listener());
            while (running) {
                ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(200));
                consume(records);
                commit(uncommitted.keySet());
                reportAssignment();
            }
        } catch (WakeupException e) {
            // stop() during poll or commit: fall through to the clean close
        } finally {
            try {
                commit(uncommitted.keySet());
            } catch (WakeupException e) {
                commit(uncommitted.keySet());  // the wakeup was pending: it fires once, the retry commits
            }
            consumer.close();
            print("{\"event\":\"closed\"}");
        }
    }

    private void consume(ConsumerRecords<byte[], byte[]> records) {
        for (TopicPartition tp : records.partitions()) {
            List<ConsumerRecord<byte[], byte[]>> batch = records.records(tp);
            String offsets = batch.stream().map(r -> Long.toString(r.offset())).collect(Collectors.joining(","));
            print("{\"event\":\"records\",\"topic\":" + quote(tp.topic()) + ",\"partition\":" + tp.partition()
                + ",\"offsets\":[" + offsets + "]}");
            uncommitted.put(tp, new OffsetAndMetadata(batch.get(batch.size() - 1).offset() + 1));
        }
    }

    /** Commit what was consumed of `partitions` and not committed yet; a failure is reported, never thrown. */
    private void commit(Collection<TopicPartition> partitions) {
        Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
        for (TopicPartition tp : partitions) {
            if (uncommitted.containsKey(tp)) {
                offsets.put(tp, uncommitted.get(tp));
            }
        }
        if (offsets.isEmpty()) {
            return;
        }
        try {
            consumer.commitSync(offsets);
            offsets.keySet().forEach(uncommitted::remove);
        } catch (WakeupException e) {
            throw e;
        } catch (KafkaException e) {  // CommitFailedException, RebalanceInProgressException, a timeout
            print("{\"event\":\"commit_failed\",\"error\":" + quote(e.toString()) + "}");
        }
    }

    private void reportAssignment() {
        Set<TopicPartition> now = consumer.assignment();
        if (!now.equals(reported)) {
            reported = new HashSet<>(now);
            event("assignment", now);
        }
    }

    private void event(String kind, Collection<TopicPartition> partitions) {
        Map<String, List<Integer>> byTopic = new TreeMap<>();
        for (TopicPartition tp : partitions) {
            byTopic.computeIfAbsent(tp.topic(), t -> new ArrayList<>()).add(tp.partition());
        }
        List<String> pairs = new ArrayList<>();
        byTopic.forEach((topic, ps) -> ps.stream().sorted().forEach(p -> pairs.add("[" + quote(topic) + "," + p + "]")));
        var group = consumer.groupMetadata();
        print("{\"event\":" + quote(kind) + ",\"partitions\":[" + String.join(",", pairs) + "],\"generation\":"
            + group.generationId() + ",\"member_id\":" + quote(group.memberId()) + "}");
    }

    private void print(String line) {
        out.println(line);
        out.flush();
    }

    private static String quote(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            switch (c) {
                case '"' -> b.append("\\\"");
                case '\\' -> b.append("\\\\");
                case '\n' -> b.append("\\n");
                case '\r' -> b.append("\\r");
                case '\t' -> b.append("\\t");
                default -> {
                    if (c < 0x20) {
                        b.append(String.format("\\u%04x", (int) c));
                    } else {
                        b.append(c);
                    }
                }
            }
        }
        return b.append('"').toString();
    }

    /** Reports each change of ownership; commits what was consumed of a partition before it is revoked. */
    private final class Listener implements ConsumerRebalanceListener {
        @Override
        public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
            commit(partitions);
            partitions.forEach(uncommitted::remove);
            event("revoked", partitions);
        }

        @Override
        public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
            event("assigned", partitions);
        }

        @Override
        public void onPartitionsLost(Collection<TopicPartition> partitions) {
            partitions.forEach(uncommitted::remove);
            event("lost", partitions);
        }
    }
}
