package io.rebalanceplanner.apply;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import java.util.List;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The JSON reader, and plan refusals worded as jobs/apply/plan_file.py words them (tests/unit/test_planned_assignor.py). */
class PlanTest {
    private static final String PLAN = PlannedAssignorTest.byName("01-serve-same-member-ids").planText();

    @Test
    void theJsonReaderReadsWhatPythonsJsonModuleReads() throws Json.JsonException {
        assertEquals(Map.of("a", List.of(1L, -2L, 2.5, 1e3, true, false), "b", "x\"\\/\b\f\n\r\t\u00e9", "c", Map.of()),
            Json.parse(" {\"a\": [1, -2, 2.5, 1e3, true, false], \"b\": \"x\\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e9\", \"c\": {}}\n"));
        assertEquals(Map.of("k", 2L), Json.parse("{\"k\": 1, \"k\": 2}"));  // the last value of a repeated key
        assertEquals(List.of(List.of()), Json.parse("[[]]"));
        assertEquals(null, Json.parse("null"));
        assertEquals(9.223372036854775808E18, Json.parse("9223372036854775808"));
    }

    @ParameterizedTest
    @CsvSource(delimiter = '|', value = {
        "{not json|Expecting property name enclosed in double quotes at char 1",
        "{\"a\": 1|Expecting ',' delimiter at char 7",
        "[1, 2] x|Extra data at char 7",
        "01|Extra data at char 1",
        "\"tab\there\"|Invalid control character at char 4",
        "[1.]|Expecting digits after '.' at char 3",
        "|Expecting value at char 0",
    })
    void notJsonIsRefusedWithWhereItStops(String text, String message) {
        Json.JsonException e = assertThrows(Json.JsonException.class, () -> Json.parse(text == null ? "" : text));
        assertEquals(message, e.getMessage());
    }

    @ParameterizedTest
    @CsvSource(delimiter = '|', value = {
        "{\"orders\": [0, 1, 2]}|{\"orders\": [0, 1, 2], \"refunds\": [1]}|.assignment.refunds: partition 1 is also planned for 'c-0-5b1f4f7e-3c1d-4b8a-9f61-0d7c2a4e9b10'|malformed_plan",
        "\"orders\": [0, 1, 2]|\"orders\": [0, 1, 2, 6]|.assignment.orders[3]: partition 6 out of range ('orders' has 6 partitions)|malformed_plan",
        "\"orders\": [0, 1, 2]|\"orders\": [0, 1]|topics.orders: partitions [2] are planned for no member|malformed_plan",
        "\"format\": \"rebalance-plan/1\"|\"format\": \"other/2\"|format: expected 'rebalance-plan/1', got 'other/2'|wrong_format",
        "\"generation_id\": 4|\"generation_id\": \"4\"|generation_id: expected an integer >= 1, got '4'|malformed_plan",
        "\"generation_id\": 4|\"generation_id\": true|generation_id: expected an integer >= 1, got True|malformed_plan",
        "\"orders\": \"yPjDjFk0SN2Vz3E1u9m6kQ\"|\"orders\": \"short\"|topic_ids.orders: expected a Kafka topic id (22 URL-safe base64 characters), got 'short'|malformed_plan",
    })
    void aBadPlanIsRefusedNamingTheJsonPath(String from, String to, String message, String code) {
        assertTrue(PLAN.contains(from), from);
        PlanException e = assertThrows(PlanException.class, () -> Plan.parse(PLAN.replace(from, to), "plan"));
        assertTrue(e.getMessage().contains(message), e.getMessage());
        assertTrue(e.getMessage().startsWith("plan: "), e.getMessage());
        assertEquals(code, e.code());
    }

    @Test
    void aGoodPlanReadsWhole() throws PlanException {
        Plan plan = Plan.parse(PLAN, "plan");
        assertEquals("payments", plan.groupId());
        assertEquals(4, plan.generationId());
        assertEquals(Map.of("orders", 6, "refunds", 2), plan.topics());
        assertEquals(8, plan.owners().size());
        assertEquals(List.of("orders", "refunds"), plan.members().get("c-1-8e2a6c44-1f0b-4e5d-a7c3-62b9d0f1e835").topics());
    }
}
