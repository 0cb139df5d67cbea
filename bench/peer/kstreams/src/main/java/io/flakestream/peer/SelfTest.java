package io.flakestream.peer;

import java.nio.charset.StandardCharsets;

/**
 * {@code java -jar peer-kstreams.jar selftest}: the splice checked against
 * the cases of flakestream's codec tests (codec/splice_test.go) and the bad
 * orders of internal/orders, one line per failure, exit 1 if any. The peer
 * bench runs it after every build, so a peer that splices differently from
 * flakestream is never measured.
 */
final class SelfTest {
    private SelfTest() {}

    private static int failures;

    static int run() {
        Json j = new Json("order_no");
        numbered(j, "{}", "{\"order_no\":\"42\"}");
        numbered(j, "{ }", "{\"order_no\":\"42\" }");
        numbered(j, "{\"a\":1}", "{\"a\":1,\"order_no\":\"42\"}");
        numbered(j, "{\"a\":1 }", "{\"a\":1,\"order_no\":\"42\" }");
        numbered(j, "{\"x\":{\"order_no\":\"1\"}}", "{\"x\":{\"order_no\":\"1\"},\"order_no\":\"42\"}");
        numbered(j, "{\"order_no\":null}", "{\"order_no\":\"42\"}");
        numbered(j, "{ \"a\":null, \"order_no\" : null , \"b\":null }", "{ \"a\":null, \"order_no\" : \"42\" , \"b\":null }");
        numbered(j, "{\"s\":\"\\u00e9\\\"x\",\"n\":[1,-2.5e3,true,false,null,{}]}",
            "{\"s\":\"\\u00e9\\\"x\",\"n\":[1,-2.5e3,true,false,null,{}],\"order_no\":\"42\"}");
        has(j, "{\"order_no\":\"7\"}", 7);
        has(j, "{\"a\":1,\"order_no\":9007199254740993}", 9007199254740993L);
        bad(j, "{\"order_ref\":\"ORD-00000001\", amount: 12.50", "not_json");
        bad(j, "[\"ORD-00000001\", 12.50]", "not_object");
        bad(j, "\"x\"", "not_object");
        bad(j, "{\"a\":1} x", "not_json");
        bad(j, "", "not_json");
        badBytes(j, "{\"order_ref\":\"ORD-1\",\"note\":\"caf\u00e9\"}".getBytes(StandardCharsets.ISO_8859_1), "invalid_utf8");
        bad(j, "{\"order_ref\":\"ORD-1\",\"order_no\":\"12ab\"}", "invalid_number");
        bad(j, "{\"order_no\":-1}", "invalid_number");
        bad(j, "{\"order_no\":\"1\",\"order_no\":\"2\"}", "duplicate_field");
        badBytes(j, new byte[Json.MAX_BYTES + 1], "too_large");
        System.err.println("peer-kstreams selftest: " + (failures == 0 ? "ok" : failures + " failures"));
        return failures == 0 ? 0 : 1;
    }

    private static void numbered(Json j, String in, String want) {
        byte[] v = in.getBytes(StandardCharsets.UTF_8);
        Json.Inspection insp = j.inspect(v);
        if (insp.kind != Json.NEEDS_NUMBER) {
            fail(in, "kind " + insp.kind + " (" + insp.errorClass + ": " + insp.error + "), want NEEDS_NUMBER");
            return;
        }
        String got = new String(j.splice(v, insp, 42), StandardCharsets.UTF_8);
        if (!got.equals(want)) {
            fail(in, "spliced " + got + ", want " + want);
        }
    }

    private static void has(Json j, String in, long want) {
        Json.Inspection insp = j.inspect(in.getBytes(StandardCharsets.UTF_8));
        if (insp.kind != Json.HAS_NUMBER || insp.number != want) {
            fail(in, "kind " + insp.kind + " number " + insp.number + ", want HAS_NUMBER " + want);
        }
    }

    private static void bad(Json j, String in, String cls) {
        badBytes(j, in.getBytes(StandardCharsets.UTF_8), cls);
    }

    private static void badBytes(Json j, byte[] in, String cls) {
        Json.Inspection insp = j.inspect(in);
        if (insp.kind != Json.BAD || !cls.equals(insp.errorClass)) {
            String shown = in.length > 80 ? in.length + " bytes" : new String(in, StandardCharsets.ISO_8859_1);
            fail(shown, "kind " + insp.kind + " class " + insp.errorClass + ", want BAD " + cls);
        }
    }

    private static void fail(String in, String msg) {
        failures++;
        System.err.println("FAIL " + in + ": " + msg);
    }
}
