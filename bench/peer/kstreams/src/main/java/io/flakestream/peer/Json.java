package io.flakestream.peer;

import java.nio.charset.StandardCharsets;

/**
 * A strict one-pass JSON check of an order value, the counterpart of
 * flakestream's codec.Inspect: the value must be valid UTF-8 JSON whose top
 * level is an object; the number field, if present, is null or a
 * non-negative int64 written as a JSON string or integer, at most once. It
 * records where a new member goes, so that splicing needs no second scan.
 */
final class Json {
    static final int BAD = 0;
    static final int NEEDS_NUMBER = 1;
    static final int HAS_NUMBER = 2;
    /** flakestream's default --max-record-bytes. */
    static final int MAX_BYTES = 1 << 20;
    private static final int MAX_DEPTH = 512;

    /** What to do with one value, and where to splice. */
    static final class Inspection {
        int kind;
        long number;
        String errorClass;
        String error;
        int insertAt;
        boolean empty;
        int nullAt = -1;
    }

    private final byte[] field;
    private final byte[] member;

    Json(String field) {
        this.field = field.getBytes(StandardCharsets.UTF_8);
        this.member = (",\"" + field + "\":").getBytes(StandardCharsets.UTF_8);
    }

    /** The value with its number set to n; in must be v's NEEDS_NUMBER inspection. */
    byte[] splice(byte[] v, Inspection in, long n) {
        byte[] num = ("\"" + n + "\"").getBytes(StandardCharsets.US_ASCII);
        if (in.nullAt >= 0) {
            byte[] out = new byte[v.length - 4 + num.length];
            System.arraycopy(v, 0, out, 0, in.nullAt);
            System.arraycopy(num, 0, out, in.nullAt, num.length);
            System.arraycopy(v, in.nullAt + 4, out, in.nullAt + num.length, v.length - in.nullAt - 4);
            return out;
        }
        int m = in.empty ? member.length - 1 : member.length;
        int mFrom = in.empty ? 1 : 0;
        byte[] out = new byte[v.length + m + num.length];
        System.arraycopy(v, 0, out, 0, in.insertAt);
        System.arraycopy(member, mFrom, out, in.insertAt, m);
        System.arraycopy(num, 0, out, in.insertAt + m, num.length);
        System.arraycopy(v, in.insertAt, out, in.insertAt + m + num.length, v.length - in.insertAt);
        return out;
    }

    Inspection inspect(byte[] v) {
        Inspection in = new Inspection();
        if (v == null) {
            return bad(in, "not_json", "no value");
        }
        if (v.length > MAX_BYTES) {
            return bad(in, "too_large", "value of " + v.length + " bytes");
        }
        try {
            new Scan(v, in).top();
        } catch (Fail f) {
            return bad(in, f.cls, f.getMessage());
        }
        return in;
    }

    private static Inspection bad(Inspection in, String cls, String msg) {
        in.kind = BAD;
        in.errorClass = cls;
        in.error = msg;
        return in;
    }

    /** A bad value: its dead-letter class and why. */
    static final class Fail extends Exception {
        final String cls;

        Fail(String cls, String msg) {
            super(msg, null, false, false);
            this.cls = cls;
        }
    }

    private final class Scan {
        final byte[] b;
        final Inspection in;
        int i;
        boolean seen;

        Scan(byte[] b, Inspection in) {
            this.b = b;
            this.in = in;
        }

        void top() throws Fail {
            ws();
            if (i >= b.length) {
                throw new Fail("not_json", "empty value");
            }
            if (b[i] != '{') {
                value(0);
                ws();
                if (i != b.length) {
                    throw new Fail("not_json", "data after the value at byte " + i);
                }
                throw new Fail("not_object", "the value is not a JSON object");
            }
            i++;
            int open = i;
            ws();
            if (peek() == '}') {
                // Right after the brace, as codec does: { } -> {"order_no":"42" }
                in.empty = true;
                in.insertAt = open;
                i++;
            } else {
                for (;;) {
                    ws();
                    int ks = i;
                    string();
                    boolean isField = i - ks - 2 == field.length && regionIs(ks + 1, field);
                    ws();
                    expect(':');
                    ws();
                    int vs = i;
                    value(1);
                    if (isField) {
                        number(vs, i);
                    }
                    in.insertAt = i;
                    ws();
                    byte c = peek();
                    i++;
                    if (c == '}') {
                        break;
                    }
                    if (c != ',') {
                        throw new Fail("not_json", "want , or } at byte " + (i - 1));
                    }
                }
            }
            ws();
            if (i != b.length) {
                throw new Fail("not_json", "data after the object at byte " + i);
            }
            if (!seen || in.nullAt >= 0) {
                in.kind = NEEDS_NUMBER;
            }
        }

        /** The number field's value, b[from:to]. */
        void number(int from, int to) throws Fail {
            if (seen) {
                throw new Fail("duplicate_field", "field appears twice");
            }
            seen = true;
            if (to - from == 4 && b[from] == 'n') {
                in.nullAt = from;
                return;
            }
            int s = from, e = to;
            if (b[s] == '"') {
                s++;
                e--;
            }
            long n = 0;
            if (e <= s || e - s > 19 || (b[s] == '0' && e - s > 1)) {
                throw new Fail("invalid_number", "not a number");
            }
            for (int k = s; k < e; k++) {
                int d = b[k] - '0';
                if (d < 0 || d > 9 || n > (Long.MAX_VALUE - d) / 10) {
                    throw new Fail("invalid_number", "not a non-negative int64");
                }
                n = n * 10 + d;
            }
            in.kind = HAS_NUMBER;
            in.number = n;
        }

        boolean regionIs(int at, byte[] want) {
            for (int k = 0; k < want.length; k++) {
                if (b[at + k] != want[k]) {
                    return false;
                }
            }
            return true;
        }

        byte peek() throws Fail {
            if (i >= b.length) {
                throw new Fail("not_json", "unexpected end");
            }
            return b[i];
        }

        void expect(char c) throws Fail {
            if (peek() != c) {
                throw new Fail("not_json", "want " + c + " at byte " + i);
            }
            i++;
        }

        void ws() {
            while (i < b.length && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r')) {
                i++;
            }
        }

        void value(int depth) throws Fail {
            if (depth > MAX_DEPTH) {
                throw new Fail("not_json", "nested too deep");
            }
            switch (peek()) {
                case '"' -> string();
                case '{' -> {
                    i++;
                    ws();
                    if (peek() == '}') {
                        i++;
                        return;
                    }
                    for (;;) {
                        ws();
                        string();
                        ws();
                        expect(':');
                        ws();
                        value(depth + 1);
                        ws();
                        byte c = peek();
                        i++;
                        if (c == '}') {
                            return;
                        }
                        if (c != ',') {
                            throw new Fail("not_json", "want , or } at byte " + (i - 1));
                        }
                    }
                }
                case '[' -> {
                    i++;
                    ws();
                    if (peek() == ']') {
                        i++;
                        return;
                    }
                    for (;;) {
                        ws();
                        value(depth + 1);
                        ws();
                        byte c = peek();
                        i++;
                        if (c == ']') {
                            return;
                        }
                        if (c != ',') {
                            throw new Fail("not_json", "want , or ] at byte " + (i - 1));
                        }
                    }
                }
                case 't' -> literal("true");
                case 'f' -> literal("false");
                case 'n' -> literal("null");
                default -> num();
            }
        }

        void literal(String w) throws Fail {
            for (int k = 0; k < w.length(); k++) {
                if (i >= b.length || b[i] != w.charAt(k)) {
                    throw new Fail("not_json", "bad literal at byte " + i);
                }
                i++;
            }
        }

        void num() throws Fail {
            int s = i;
            if (i < b.length && b[i] == '-') {
                i++;
            }
            if (i < b.length && b[i] == '0') {
                i++;
            } else if (!digits()) {
                throw new Fail("not_json", "bad value at byte " + s);
            }
            if (i < b.length && b[i] == '.') {
                i++;
                if (!digits()) {
                    throw new Fail("not_json", "bad number at byte " + s);
                }
            }
            if (i < b.length && (b[i] == 'e' || b[i] == 'E')) {
                i++;
                if (i < b.length && (b[i] == '+' || b[i] == '-')) {
                    i++;
                }
                if (!digits()) {
                    throw new Fail("not_json", "bad number at byte " + s);
                }
            }
        }

        boolean digits() {
            int s = i;
            while (i < b.length && b[i] >= '0' && b[i] <= '9') {
                i++;
            }
            return i > s;
        }

        /** A string, its UTF-8 and escapes checked; i ends after the quote. */
        void string() throws Fail {
            expect('"');
            for (;;) {
                if (i >= b.length) {
                    throw new Fail("not_json", "unterminated string");
                }
                int c = b[i] & 0xff;
                if (c == '"') {
                    i++;
                    return;
                }
                if (c < 0x20) {
                    throw new Fail("not_json", "control character in a string at byte " + i);
                }
                if (c == '\\') {
                    i++;
                    byte e = peek();
                    if (e == 'u') {
                        for (int k = 1; k <= 4; k++) {
                            if (i + k >= b.length || Character.digit(b[i + k], 16) < 0) {
                                throw new Fail("not_json", "bad \\u escape at byte " + i);
                            }
                        }
                        i += 5;
                    } else if ("\"\\/bfnrt".indexOf(e) >= 0) {
                        i++;
                    } else {
                        throw new Fail("not_json", "bad escape at byte " + i);
                    }
                    continue;
                }
                if (c < 0x80) {
                    i++;
                    continue;
                }
                utf8(c);
            }
        }

        /** One multi-byte UTF-8 sequence starting with lead byte c at i. */
        void utf8(int c) throws Fail {
            int n;
            int min;
            if (c >= 0xc2 && c <= 0xdf) {
                n = 1;
                min = 0x80;
            } else if (c >= 0xe0 && c <= 0xef) {
                n = 2;
                min = 0x800;
            } else if (c >= 0xf0 && c <= 0xf4) {
                n = 3;
                min = 0x10000;
            } else {
                throw new Fail("invalid_utf8", "invalid UTF-8 at byte " + i);
            }
            int cp = c & (0x3f >> n);
            for (int k = 1; k <= n; k++) {
                if (i + k >= b.length || (b[i + k] & 0xc0) != 0x80) {
                    throw new Fail("invalid_utf8", "invalid UTF-8 at byte " + i);
                }
                cp = (cp << 6) | (b[i + k] & 0x3f);
            }
            if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) {
                throw new Fail("invalid_utf8", "invalid UTF-8 at byte " + i);
            }
            i += n + 1;
        }
    }
}
