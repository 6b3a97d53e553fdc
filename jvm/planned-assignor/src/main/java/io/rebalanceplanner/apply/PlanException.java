package io.rebalanceplanner.apply;

/**
 * A plan that cannot be served; the message names the file or JSON path and the problem
 * (jobs/apply/plan_file.py PlanError).
 * {@link #code()} is the reason code of schemas/fixtures/apply: {@code plan_unreadable} (no file, or not UTF-8),
 * {@code wrong_format} (not a rebalance-plan/1 document) or {@code malformed_plan} (anything else).
 */
public class PlanException extends Exception {
    private static final long serialVersionUID = 1L;

    public static final String PLAN_UNREADABLE = "plan_unreadable";
    public static final String WRONG_FORMAT = "wrong_format";
    public static final String MALFORMED_PLAN = "malformed_plan";

    private final String code;

    public PlanException(String message) {
        this(MALFORMED_PLAN, message);
    }

    public PlanException(String code, String message) {
        super(message);
        this.code = code;
    }

    public String code() {
        return code;
    }
}
