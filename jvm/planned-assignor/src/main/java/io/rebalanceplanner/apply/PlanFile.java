package io.rebalanceplanner.apply;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.attribute.BasicFileAttributes;
import java.nio.file.attribute.FileTime;
import java.util.Objects;

/**
 * A plan file, read again only when it changed (its file key, modification time or size): an operator drops a newly
 * approved plan in place and the next assignment serves it, without re-parsing a large plan at every assignment.
 * {@code rebalance export} replaces the file atomically (a rename), so a reader never sees half a plan. Thread-safe.
 */
public final class PlanFile {
    private record Version(Object fileKey, FileTime modified, long size) { }

    private final Path path;
    private Version version;
    private Plan plan;
    private PlanException error;

    public PlanFile(Path path) {
        this.path = Objects.requireNonNull(path);
    }

    public Path path() {
        return path;
    }

    /** The file's plan; the exception, with its reason code, when there is no file or it holds no valid plan. */
    public synchronized Plan read() throws PlanException {
        BasicFileAttributes attributes;
        try {
            attributes = Files.readAttributes(path, BasicFileAttributes.class);
        } catch (NoSuchFileException e) {
            forget();
            throw new PlanException(PlanException.PLAN_UNREADABLE, "plan file " + path + ": No such file or directory");
        } catch (IOException e) {
            forget();
            throw new PlanException(PlanException.PLAN_UNREADABLE, "plan file " + path + ": " + e);
        }
        Version now = new Version(attributes.fileKey(), attributes.lastModifiedTime(), attributes.size());
        if (!now.equals(version)) {
            version = now;
            try {
                plan = Plan.load(path);
                error = null;
            } catch (PlanException e) {
                plan = null;
                error = e;
            }
        }
        if (error != null) {
            throw error;
        }
        return plan;
    }

    private void forget() {
        version = null;
        plan = null;
        error = null;
    }
}
