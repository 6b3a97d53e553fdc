package io.rebalanceplanner.apply.broker;

import io.rebalanceplanner.apply.Plan;
import io.rebalanceplanner.apply.PlanException;
import io.rebalanceplanner.apply.PlanFile;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.io.IOException;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.Map;
import java.util.Objects;
import java.util.TreeMap;

/**
 * The plans in the directory an operator configures: every {@code *.json} file in it, except hidden ones ({@code
 * rebalance export} and jobs/apply/plan_file.py write_plan write {@code .name.tmp-pid} and rename it into place).
 * Each file is parsed again only when it changed ({@link PlanFile}), so a plan dropped in place is served at the next
 * assignment, without a broker restart. A file that holds no valid plan is left out with ONE log line (again only when
 * the refusal changes), never an exception. Thread-safe: the coordinator may run assignments off its threads
 * (group.consumer.assignor.offload.enable).
 */
final class PlanDirectory {
    private static final Logger log = LoggerFactory.getLogger(PlanDirectory.class);

    private final Path directory;
    private final Map<Path, PlanFile> files = new HashMap<>();
    private final Map<Path, String> refused = new HashMap<>();  // file -> the refusal already logged
    private boolean unreadableLogged;

    PlanDirectory(Path directory) {
        this.directory = Objects.requireNonNull(directory);
    }

    Path directory() {
        return directory;
    }

    /** File name to plan, sorted by file name, of every valid plan in the directory now. */
    synchronized Map<String, Plan> plans() {
        Map<String, Plan> plans = new TreeMap<>();
        Map<Path, PlanFile> seen = new HashMap<>();
        try (DirectoryStream<Path> entries = Files.newDirectoryStream(directory, "*.json")) {
            for (Path path : entries) {
                if (path.getFileName().toString().startsWith(".") || !Files.isRegularFile(path)) {
                    continue;
                }
                PlanFile file = files.getOrDefault(path, new PlanFile(path));
                seen.put(path, file);
                try {
                    plans.put(path.getFileName().toString(), file.read());
                    refused.remove(path);
                } catch (PlanException e) {
                    if (!e.getMessage().equals(refused.put(path, e.getMessage()))) {
                        log.warn("planned assignor: plan file ignored ({}: {})", e.code(), e.getMessage());
                    }
                }
            }
            unreadableLogged = false;
        } catch (IOException | RuntimeException e) {
            if (!unreadableLogged) {
                log.warn("planned assignor: plan directory {} not readable ({}); no plan served", directory, e.toString());
                unreadableLogged = true;
            }
        }
        files.keySet().retainAll(seen.keySet());
        files.putAll(seen);
        refused.keySet().retainAll(seen.keySet());
        return plans;
    }
}
