package io.flakestream.peer;

import java.nio.charset.StandardCharsets;
import org.apache.kafka.common.header.Headers;
import org.apache.kafka.streams.processor.api.Processor;
import org.apache.kafka.streams.processor.api.ProcessorContext;
import org.apache.kafka.streams.processor.api.Record;
import org.apache.kafka.streams.processor.api.RecordMetadata;

/**
 * The work flakestream's worker does to one JSON order (pipeline/batch.go),
 * done in a Kafka Streams processor:
 *
 * <ul>
 *   <li>the value is checked ({@link Json#inspect}: valid UTF-8 JSON, an
 *       object, the number field absent, null or a valid number, once);
 *   <li>an order without a number gets one: {@code ,"order_no":"<n>"} after
 *       its last member (or the null replaced), every other byte unchanged,
 *       and the headers {@code flakestream-number: <n>} and
 *       {@code flakestream-source: <topic>/<partition>/<offset>} added to
 *       its own;
 *   <li>an order that has one passes unchanged with the same two headers;
 *   <li>anything else goes, unchanged, to the DLQ with
 *       {@code flakestream-error-class}, {@code flakestream-error} and
 *       {@code flakestream-source}.
 * </ul>
 *
 * <p>The number is not flakestream's: it comes from a counter of this task,
 * starting at a 19-digit value made like a snowflake (milliseconds since
 * flakestream's epoch shifted left 22, plus the task's partition shifted
 * left 12), so the value and the header have a real number's length. It is
 * unique within a task's life only: it stands in for the Redis sequencer,
 * which is not what this peer measures.
 */
final class Splice implements Processor<byte[], byte[], byte[], byte[]> {
    static final String OUT = "out";
    static final String DLQ = "dlq";
    static final String HEADER_NUMBER = "flakestream-number";
    static final String HEADER_SOURCE = "flakestream-source";
    static final String HEADER_ERROR_CLASS = "flakestream-error-class";
    static final String HEADER_ERROR = "flakestream-error";
    /** flakestream's default epoch, 2021-11-12T00:00:00+08:00. */
    static final long EPOCH_MS = 1636646400000L;

    private final Json json;
    private ProcessorContext<byte[], byte[]> ctx;
    private long next;

    Splice(String field) {
        this.json = new Json(field);
    }

    @Override
    public void init(ProcessorContext<byte[], byte[]> context) {
        this.ctx = context;
        long part = context.taskId().partition() & 0x3ff;
        this.next = ((System.currentTimeMillis() - EPOCH_MS) << 22) | (part << 12);
    }

    @Override
    public void process(Record<byte[], byte[]> r) {
        byte[] v = r.value();
        Headers h = r.headers();
        RecordMetadata md = ctx.recordMetadata().orElseThrow();
        byte[] source = (md.topic() + "/" + md.partition() + "/" + md.offset()).getBytes(StandardCharsets.UTF_8);
        Json.Inspection in = json.inspect(v);
        switch (in.kind) {
            case Json.NEEDS_NUMBER -> {
                long n = next++;
                byte[] out = json.splice(v, in, n);
                h.add(HEADER_NUMBER, Long.toString(n).getBytes(StandardCharsets.US_ASCII));
                h.add(HEADER_SOURCE, source);
                ctx.forward(r.withValue(out), OUT);
            }
            case Json.HAS_NUMBER -> {
                h.add(HEADER_NUMBER, Long.toString(in.number).getBytes(StandardCharsets.US_ASCII));
                h.add(HEADER_SOURCE, source);
                ctx.forward(r, OUT);
            }
            default -> {
                h.add(HEADER_ERROR_CLASS, in.errorClass.getBytes(StandardCharsets.US_ASCII));
                h.add(HEADER_ERROR, in.error.getBytes(StandardCharsets.UTF_8));
                h.add(HEADER_SOURCE, source);
                ctx.forward(r, DLQ);
            }
        }
    }
}
