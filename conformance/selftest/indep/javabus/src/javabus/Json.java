package javabus;

import java.math.BigDecimal;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Strict RFC 8259 JSON handling, standard library only.
 *
 * Two entry points:
 *  - {@link #scanMessage} validates one NDJSON line (bytes) iteratively and extracts the
 *    top-level routing fields (id, sessionId, method, presence of result/error).
 *  - {@link #parseTree} builds a small tree (Map/List/String/BigDecimal/Boolean/NULL), used
 *    for the configuration file.
 */
final class Json {
    private Json() {}

    /** Thrown when bytes are not valid JSON. */
    static final class ParseException extends Exception {
        final int pos;
        ParseException(String msg, int pos) { super(msg + " at byte " + pos); this.pos = pos; }
    }

    /** Sentinel for JSON null in trees. */
    static final Object NULL = new Object() { public String toString() { return "null"; } };

    static final int MAX_REQUEST_ID_LEN = 128;
    static final int MAX_SESSION_ID_LEN = 256;

    /** Routing fields of one message. */
    static final class Routing {
        boolean isObject;
        /** id is a string or a number. */
        boolean hasId;
        /** canonical identity of the id: "s:" + value or "n:" + canonical number. */
        String idKey;
        /** printable form of the id, for logs. */
        String idText;
        String sessionId;
        String method;
        boolean hasResult;
        boolean hasError;
        /** non-null when the routing fields cannot be extracted (reason). */
        String bad;

        boolean isResponseShaped() { return hasResult || hasError; }
    }

    // ------------------------------------------------------------------ helpers

    static boolean isWs(int b) { return b == 0x20 || b == 0x09 || b == 0x0A || b == 0x0D; }

    /** True if the range is empty or JSON whitespace only. */
    static boolean isBlank(byte[] buf, int off, int len) {
        for (int i = off; i < off + len; i++) if (!isWs(buf[i] & 0xff)) return false;
        return true;
    }

    private static int skipWs(byte[] b, int p, int end) {
        while (p < end && isWs(b[p] & 0xff)) p++;
        return p;
    }

    private static int hex(int c) {
        if (c >= '0' && c <= '9') return c - '0';
        if (c >= 'a' && c <= 'f') return c - 'a' + 10;
        if (c >= 'A' && c <= 'F') return c - 'A' + 10;
        return -1;
    }

    /**
     * Scans a string starting at the opening quote at p. Validates escapes, control characters
     * and UTF-8. If sb != null, appends the decoded value. Returns position after closing quote.
     */
    static int scanString(byte[] b, int p, int end, StringBuilder sb) throws ParseException {
        p++; // opening quote
        while (true) {
            if (p >= end) throw new ParseException("unterminated string", p);
            int c = b[p] & 0xff;
            if (c == '"') return p + 1;
            if (c == '\\') {
                if (p + 1 >= end) throw new ParseException("unterminated escape", p);
                int e = b[p + 1] & 0xff;
                char out;
                switch (e) {
                    case '"': out = '"'; break;
                    case '\\': out = '\\'; break;
                    case '/': out = '/'; break;
                    case 'b': out = '\b'; break;
                    case 'f': out = '\f'; break;
                    case 'n': out = '\n'; break;
                    case 'r': out = '\r'; break;
                    case 't': out = '\t'; break;
                    case 'u': {
                        if (p + 5 >= end) throw new ParseException("short \\u escape", p);
                        int v = 0;
                        for (int i = 2; i < 6; i++) {
                            int h = hex(b[p + i] & 0xff);
                            if (h < 0) throw new ParseException("bad \\u escape", p);
                            v = (v << 4) | h;
                        }
                        if (sb != null) sb.append((char) v);
                        p += 6;
                        continue;
                    }
                    default: throw new ParseException("bad escape", p);
                }
                if (sb != null) sb.append(out);
                p += 2;
                continue;
            }
            if (c < 0x20) throw new ParseException("control character in string", p);
            if (c < 0x80) {
                if (sb != null) sb.append((char) c);
                p++;
                continue;
            }
            // multi-byte UTF-8
            int need, cp, min;
            if (c >= 0xC2 && c <= 0xDF) { need = 1; cp = c & 0x1F; min = 0x80; }
            else if (c >= 0xE0 && c <= 0xEF) { need = 2; cp = c & 0x0F; min = 0x800; }
            else if (c >= 0xF0 && c <= 0xF4) { need = 3; cp = c & 0x07; min = 0x10000; }
            else throw new ParseException("invalid UTF-8 lead byte", p);
            if (p + need >= end) throw new ParseException("truncated UTF-8 sequence", p);
            for (int i = 1; i <= need; i++) {
                int cc = b[p + i] & 0xff;
                if ((cc & 0xC0) != 0x80) throw new ParseException("invalid UTF-8 continuation", p + i);
                cp = (cp << 6) | (cc & 0x3F);
            }
            if (cp < min) throw new ParseException("overlong UTF-8", p);
            if (cp >= 0xD800 && cp <= 0xDFFF) throw new ParseException("UTF-8 encoded surrogate", p);
            if (cp > 0x10FFFF) throw new ParseException("code point above U+10FFFF", p);
            if (sb != null) sb.appendCodePoint(cp);
            p += need + 1;
        }
    }

    /** Scans a number at p; returns the end position. */
    static int scanNumber(byte[] b, int p, int end) throws ParseException {
        int s = p;
        if (p < end && b[p] == '-') p++;
        if (p >= end) throw new ParseException("bad number", s);
        if (b[p] == '0') {
            p++;
        } else if (b[p] >= '1' && b[p] <= '9') {
            while (p < end && b[p] >= '0' && b[p] <= '9') p++;
        } else throw new ParseException("bad number", s);
        if (p < end && b[p] == '.') {
            p++;
            int d = p;
            while (p < end && b[p] >= '0' && b[p] <= '9') p++;
            if (p == d) throw new ParseException("bad fraction", s);
        }
        if (p < end && (b[p] == 'e' || b[p] == 'E')) {
            p++;
            if (p < end && (b[p] == '+' || b[p] == '-')) p++;
            int d = p;
            while (p < end && b[p] >= '0' && b[p] <= '9') p++;
            if (p == d) throw new ParseException("bad exponent", s);
        }
        return p;
    }

    private static int scanLiteral(byte[] b, int p, int end, String lit) throws ParseException {
        int n = lit.length();
        if (p + n > end) throw new ParseException("bad literal", p);
        for (int i = 0; i < n; i++) if (b[p + i] != lit.charAt(i)) throw new ParseException("bad literal", p);
        return p + n;
    }

    /** Canonical identity of a numeric id: numerically equal numbers get the same key. */
    static String canonicalNumber(String text) {
        try {
            BigDecimal d = new BigDecimal(text);
            if (d.signum() == 0) return "0";
            return d.stripTrailingZeros().toString();
        } catch (NumberFormatException | ArithmeticException e) {
            return text;
        }
    }

    // ------------------------------------------------------------------ message scanner

    private static final int T_STRING = 1, T_NUMBER = 2, T_OTHER = 3, T_NULL = 4;

    /**
     * Validates buf[off, off+len) as exactly one JSON value (surrounding whitespace allowed)
     * and extracts the routing fields when it is an object. Iterative: no recursion.
     */
    static Routing scanMessage(byte[] b, int off, int len) throws ParseException {
        final int end = off + len;
        Routing r = new Routing();
        byte[] stack = new byte[32];
        int depth = 0;
        int p = skipWs(b, off, end);
        if (p >= end) throw new ParseException("empty", p);
        r.isObject = b[p] == '{';

        String curKey = null;          // key of the top-level member whose value is being parsed
        int valStart = -1, valType = 0; // its value span start and type
        String valDecoded = null;
        boolean seenId = false, seenSid = false, seenMethod = false, seenResult = false, seenError = false;
        StringBuilder sb = new StringBuilder();

        // state: 0 = expect value, 1 = after value, 2 = expect key
        int state = 0;
        while (true) {
            if (state == 0) {
                p = skipWs(b, p, end);
                if (p >= end) throw new ParseException("unexpected end", p);
                boolean top = depth == 1 && stack[0] == '{';
                if (top) { valStart = p; valDecoded = null; }
                int c = b[p] & 0xff;
                if (c == '{' || c == '[') {
                    if (depth == stack.length) stack = java.util.Arrays.copyOf(stack, depth * 2);
                    stack[depth++] = (byte) c;
                    if (top) valType = T_OTHER;
                    p = skipWs(b, p + 1, end);
                    if (p < end && (b[p] == '}' || b[p] == ']') && b[p] == (c == '{' ? '}' : ']')) {
                        p++;
                        depth--;
                        state = 1;
                    } else {
                        state = (c == '{') ? 2 : 0;
                    }
                    continue;
                }
                if (c == '"') {
                    boolean decode = top && ("id".equals(curKey) || "sessionId".equals(curKey) || "method".equals(curKey));
                    if (decode) sb.setLength(0);
                    p = scanString(b, p, end, decode ? sb : null);
                    if (top) { valType = T_STRING; if (decode) valDecoded = sb.toString(); }
                } else if (c == '-' || (c >= '0' && c <= '9')) {
                    p = scanNumber(b, p, end);
                    if (top) valType = T_NUMBER;
                } else if (c == 't') {
                    p = scanLiteral(b, p, end, "true"); if (top) valType = T_OTHER;
                } else if (c == 'f') {
                    p = scanLiteral(b, p, end, "false"); if (top) valType = T_OTHER;
                } else if (c == 'n') {
                    p = scanLiteral(b, p, end, "null"); if (top) valType = T_NULL;
                } else {
                    throw new ParseException("unexpected character", p);
                }
                state = 1;
            } else if (state == 1) {
                if (depth == 0) {
                    p = skipWs(b, p, end);
                    if (p != end) throw new ParseException("trailing data", p);
                    return r;
                }
                if (depth == 1 && stack[0] == '{' && curKey != null) {
                    // a top-level member value just completed
                    String bad = null;
                    switch (curKey) {
                        case "id":
                            if (seenId) bad = "duplicate id";
                            seenId = true;
                            if (valType == T_STRING) {
                                if (valDecoded.getBytes(StandardCharsets.UTF_8).length > MAX_REQUEST_ID_LEN)
                                    bad = "id longer than " + MAX_REQUEST_ID_LEN;
                                r.hasId = true; r.idKey = "s:" + valDecoded;
                                r.idText = new String(b, valStart, p - valStart, StandardCharsets.UTF_8);
                            } else if (valType == T_NUMBER) {
                                String t = new String(b, valStart, p - valStart, StandardCharsets.US_ASCII);
                                if (t.length() > MAX_REQUEST_ID_LEN) bad = "id longer than " + MAX_REQUEST_ID_LEN;
                                else { r.hasId = true; r.idKey = "n:" + canonicalNumber(t); r.idText = t; }
                            } else if (valType != T_NULL) bad = "id is not a string or number";
                            break;
                        case "sessionId":
                            if (seenSid) bad = "duplicate sessionId";
                            seenSid = true;
                            if (valType == T_STRING) {
                                if (valDecoded.getBytes(StandardCharsets.UTF_8).length > MAX_SESSION_ID_LEN)
                                    bad = "sessionId longer than " + MAX_SESSION_ID_LEN;
                                r.sessionId = valDecoded;
                            } else if (valType != T_NULL) bad = "sessionId is not a string";
                            break;
                        case "method":
                            if (seenMethod) bad = "duplicate method";
                            seenMethod = true;
                            if (valType == T_STRING) r.method = valDecoded;
                            else if (valType != T_NULL) bad = "method is not a string";
                            break;
                        case "result":
                            if (seenResult) bad = "duplicate result";
                            seenResult = true; r.hasResult = true;
                            break;
                        case "error":
                            if (seenError) bad = "duplicate error";
                            seenError = true; r.hasError = true;
                            break;
                        default:
                            break;
                    }
                    if (bad != null && r.bad == null) r.bad = bad;
                    curKey = null;
                }
                p = skipWs(b, p, end);
                if (p >= end) throw new ParseException("unexpected end", p);
                int c = b[p] & 0xff;
                byte top = stack[depth - 1];
                if (c == ',') {
                    p++;
                    state = (top == '{') ? 2 : 0;
                } else if ((top == '{' && c == '}') || (top == '[' && c == ']')) {
                    p++;
                    depth--;
                    state = 1;
                } else {
                    throw new ParseException("expected , or close", p);
                }
            } else { // expect key
                p = skipWs(b, p, end);
                if (p >= end || b[p] != '"') throw new ParseException("expected key", p);
                if (depth == 1) {
                    sb.setLength(0);
                    p = scanString(b, p, end, sb);
                    curKey = sb.toString();
                } else {
                    p = scanString(b, p, end, null);
                }
                p = skipWs(b, p, end);
                if (p >= end || b[p] != ':') throw new ParseException("expected :", p);
                p++;
                state = 0;
            }
        }
    }

    /** Applies the "not an object" rule after a successful scan. */
    static Routing scanRouting(byte[] b, int off, int len) throws ParseException {
        Routing r = scanMessage(b, off, len);
        if (!r.isObject && r.bad == null) r.bad = "message is not a JSON object";
        return r;
    }

    // ------------------------------------------------------------------ tree parser (config)

    static Object parseTree(byte[] b) throws ParseException {
        int[] pos = {skipWs(b, 0, b.length)};
        Object v = treeValue(b, pos, 0);
        int p = skipWs(b, pos[0], b.length);
        if (p != b.length) throw new ParseException("trailing data", p);
        return v;
    }

    private static Object treeValue(byte[] b, int[] pos, int depth) throws ParseException {
        if (depth > 512) throw new ParseException("nesting too deep", pos[0]);
        int end = b.length;
        int p = skipWs(b, pos[0], end);
        if (p >= end) throw new ParseException("unexpected end", p);
        int c = b[p] & 0xff;
        if (c == '{') {
            Map<String, Object> m = new LinkedHashMap<>();
            p = skipWs(b, p + 1, end);
            if (p < end && b[p] == '}') { pos[0] = p + 1; return m; }
            while (true) {
                p = skipWs(b, p, end);
                if (p >= end || b[p] != '"') throw new ParseException("expected key", p);
                StringBuilder sb = new StringBuilder();
                p = scanString(b, p, end, sb);
                String k = sb.toString();
                p = skipWs(b, p, end);
                if (p >= end || b[p] != ':') throw new ParseException("expected :", p);
                pos[0] = p + 1;
                Object v = treeValue(b, pos, depth + 1);
                if (m.containsKey(k)) throw new ParseException("duplicate key \"" + k + "\"", p);
                m.put(k, v);
                p = skipWs(b, pos[0], end);
                if (p < end && b[p] == ',') { p++; continue; }
                if (p < end && b[p] == '}') { pos[0] = p + 1; return m; }
                throw new ParseException("expected , or }", p);
            }
        }
        if (c == '[') {
            List<Object> l = new ArrayList<>();
            p = skipWs(b, p + 1, end);
            if (p < end && b[p] == ']') { pos[0] = p + 1; return l; }
            while (true) {
                pos[0] = p;
                l.add(treeValue(b, pos, depth + 1));
                p = skipWs(b, pos[0], end);
                if (p < end && b[p] == ',') { p++; continue; }
                if (p < end && b[p] == ']') { pos[0] = p + 1; return l; }
                throw new ParseException("expected , or ]", p);
            }
        }
        if (c == '"') {
            StringBuilder sb = new StringBuilder();
            pos[0] = scanString(b, p, end, sb);
            return sb.toString();
        }
        if (c == '-' || (c >= '0' && c <= '9')) {
            int e = scanNumber(b, p, end);
            pos[0] = e;
            return new BigDecimal(new String(b, p, e - p, StandardCharsets.US_ASCII));
        }
        if (c == 't') { pos[0] = scanLiteral(b, p, end, "true"); return Boolean.TRUE; }
        if (c == 'f') { pos[0] = scanLiteral(b, p, end, "false"); return Boolean.FALSE; }
        if (c == 'n') { pos[0] = scanLiteral(b, p, end, "null"); return NULL; }
        throw new ParseException("unexpected character", p);
    }
}
