package io.rebalanceplanner.apply;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.List;
import java.util.function.Supplier;

/** What slf4j-simple (the tests' SLF4J binding) writes to System.err while a call runs: the assignors' log lines. */
public final class LogCapture {
    private LogCapture() { }

    public record Captured<T>(T result, List<String> lines) {
        public List<String> assignorLines() {
            return lines.stream().filter(l -> l.contains("planned assignor")).toList();
        }
    }

    public static synchronized <T> Captured<T> capture(Supplier<T> call) {
        PrintStream original = System.err;
        ByteArrayOutputStream buffer = new ByteArrayOutputStream();
        System.setErr(new PrintStream(buffer, true, StandardCharsets.UTF_8));
        T result;
        try {
            result = call.get();
        } finally {
            System.setErr(original);
        }
        String text = buffer.toString(StandardCharsets.UTF_8);
        return new Captured<>(result, text.isEmpty() ? List.of() : Arrays.asList(text.split("\n")));
    }
}
