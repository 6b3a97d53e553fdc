package io.rebalanceplanner.apply;

import org.apache.kafka.common.TopicPartition;

import java.util.Collection;
import java.util.Comparator;
import java.util.Optional;
import java.util.stream.Collectors;

/** How reasons and log lines name values: as the Python appliers do (its repr), so both logs read alike. */
public final class Reasons {
    public static final Comparator<TopicPartition> TOPIC_PARTITION_ORDER =
        Comparator.comparing(TopicPartition::topic).thenComparingInt(TopicPartition::partition);

    private Reasons() { }

    /** 'text', None, a number, or a list of these: ['orders', 'refunds']. */
    public static String repr(Object value) {
        if (value == null) {
            return "None";
        }
        if (value instanceof Optional<?> optional) {
            return repr(optional.orElse(null));
        }
        if (value instanceof String s) {
            return "'" + s.replace("\\", "\\\\").replace("'", "\\'") + "'";
        }
        if (value instanceof Collection<?> items) {
            return items.stream().map(Reasons::repr).collect(Collectors.joining(", ", "[", "]"));
        }
        if (value instanceof Boolean b) {
            return b ? "True" : "False";
        }
        return String.valueOf(value);
    }
}
