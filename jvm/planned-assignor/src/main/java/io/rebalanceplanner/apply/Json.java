package io.rebalanceplanner.apply;

import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * A small JSON reader (RFC 8259), so the jars need nothing beside Kafka: kafka-clients brings no JSON library to a
 * consumer application, and Jackson would be one more jar for every application to add.
 *
 * <p>Objects read as {@code Map<String, Object>} (insertion order; a repeated key keeps its last value, as Python's
 * json module does), arrays as {@code List<Object>}, integers as {@code Long} (or {@code Double} past its range),
 * other numbers as {@code Double}, and {@code true}, {@code false}, {@code null} as Boolean and null.
 */
public final class Json {

    /** Not JSON: the message gives the character offset, as Python's json module does. */
    public static final class JsonException extends Exception {
        private static final long serialVersionUID = 1L;

        JsonException(String message, int offset) {
            super(message + " at char " + offset);
        }
    }

    private static final int MAX_DEPTH = 512;

    private final String text;
    private int at;

    private Json(String text) {
        this.text = text;
    }

    public static Object parse(String text) throws JsonException {
        Json reader = new Json(text);
        reader.skipSpace();
        Object value = reader.value(0);
        reader.skipSpace();
        if (reader.at != text.length()) {
            throw new JsonException("Extra data", reader.at);
        }
        return value;
    }

    private Object value(int depth) throws JsonException {
        if (depth > MAX_DEPTH) {
            throw new JsonException("Nesting too deep", at);
        }
        if (at >= text.length()) {
            throw new JsonException("Expecting value", at);
        }
        char c = text.charAt(at);
        switch (c) {
            case '{':
                return object(depth);
            case '[':
                return array(depth);
            case '"':
                return string();
            case 't':
                return literal("true", Boolean.TRUE);
            case 'f':
                return literal("false", Boolean.FALSE);
            case 'n':
                return literal("null", null);
            default:
                if (c == '-' || (c >= '0' && c <= '9')) {
                    return number();
                }
                throw new JsonException("Expecting value", at);
        }
    }

    private Map<String, Object> object(int depth) throws JsonException {
        Map<String, Object> result = new LinkedHashMap<>();
        at++;
        skipSpace();
        if (peek() == '}') {
            at++;
            return result;
        }
        while (true) {
            skipSpace();
            if (peek() != '"') {
                throw new JsonException("Expecting property name enclosed in double quotes", at);
            }
            String key = string();
            skipSpace();
            expect(':', "Expecting ':' delimiter");
            skipSpace();
            result.put(key, value(depth + 1));
            skipSpace();
            if (peek() == ',') {
                at++;
            } else if (peek() == '}') {
                at++;
                return Collections.unmodifiableMap(result);
            } else {
                throw new JsonException("Expecting ',' delimiter", at);
            }
        }
    }

    private List<Object> array(int depth) throws JsonException {
        List<Object> result = new ArrayList<>();
        at++;
        skipSpace();
        if (peek() == ']') {
            at++;
            return result;
        }
        while (true) {
            skipSpace();
            result.add(value(depth + 1));
            skipSpace();
            if (peek() == ',') {
                at++;
            } else if (peek() == ']') {
                at++;
                return Collections.unmodifiableList(result);
            } else {
                throw new JsonException("Expecting ',' delimiter", at);
            }
        }
    }

    private String string() throws JsonException {
        int start = at;
        at++;
        StringBuilder out = new StringBuilder();
        while (true) {
            if (at >= text.length()) {
                throw new JsonException("Unterminated string starting", start);
            }
            char c = text.charAt(at++);
            if (c == '"') {
                return out.toString();
            }
            if (c < 0x20) {
                throw new JsonException("Invalid control character", at - 1);
            }
            if (c != '\\') {
                out.append(c);
                continue;
            }
            if (at >= text.length()) {
                throw new JsonException("Unterminated string starting", start);
            }
            char escape = text.charAt(at++);
            switch (escape) {
                case '"': out.append('"'); break;
                case '\\': out.append('\\'); break;
                case '/': out.append('/'); break;
                case 'b': out.append('\b'); break;
                case 'f': out.append('\f'); break;
                case 'n': out.append('\n'); break;
                case 'r': out.append('\r'); break;
                case 't': out.append('\t'); break;
                case 'u':
                    if (at + 4 > text.length()) {
                        throw new JsonException("Invalid \\uXXXX escape", at - 1);
                    }
                    try {
                        out.append((char) Integer.parseInt(text.substring(at, at + 4), 16));
                    } catch (NumberFormatException e) {
                        throw new JsonException("Invalid \\uXXXX escape", at - 1);
                    }
                    at += 4;
                    break;
                default:
                    throw new JsonException("Invalid \\escape", at - 2);
            }
        }
    }

    private Object number() throws JsonException {
        int start = at;
        if (peek() == '-') {
            at++;
        }
        if (peek() == '0') {
            at++;
        } else if (isDigit(peek())) {
            while (isDigit(peek())) {
                at++;
            }
        } else {
            throw new JsonException("Expecting value", start);
        }
        boolean integral = true;
        if (peek() == '.') {
            integral = false;
            at++;
            if (!isDigit(peek())) {
                throw new JsonException("Expecting digits after '.'", at);
            }
            while (isDigit(peek())) {
                at++;
            }
        }
        if (peek() == 'e' || peek() == 'E') {
            integral = false;
            at++;
            if (peek() == '+' || peek() == '-') {
                at++;
            }
            if (!isDigit(peek())) {
                throw new JsonException("Expecting exponent digits", at);
            }
            while (isDigit(peek())) {
                at++;
            }
        }
        String literal = text.substring(start, at);
        if (integral) {
            try {
                return Long.parseLong(literal);
            } catch (NumberFormatException e) {
                // an integer past a long: a number, never a partition or a count
            }
        }
        return Double.parseDouble(literal);
    }

    private Object literal(String word, Object value) throws JsonException {
        if (!text.startsWith(word, at)) {
            throw new JsonException("Expecting value", at);
        }
        at += word.length();
        return value;
    }

    private void expect(char c, String message) throws JsonException {
        if (peek() != c) {
            throw new JsonException(message, at);
        }
        at++;
    }

    private char peek() {
        return at < text.length() ? text.charAt(at) : '\0';
    }

    private static boolean isDigit(char c) {
        return c >= '0' && c <= '9';
    }

    private void skipSpace() {
        while (at < text.length()) {
            char c = text.charAt(at);
            if (c != ' ' && c != '\t' && c != '\n' && c != '\r') {
                return;
            }
            at++;
        }
    }
}
