package io.flakestream.peer;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.HashMap;
import java.util.Locale;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;

/**
 * The Kafka Streams peer of flakestream (issue 18, item 5): an
 * exactly_once_v2 application that reads an input topic and writes an output
 * topic in one of two forms.
 *
 * <ul>
 *   <li>{@code passthrough}: every record copied unchanged (key, value,
 *       headers, timestamp): the ceiling of the Kafka work.
 *   <li>{@code splice}: what flakestream does to a JSON order ({@link Splice}):
 *       check the value, put a number into it, add the number and source
 *       headers, and send what cannot be numbered to the dead-letter topic.
 * </ul>
 *
 * <p>Every setting is a flag {@code --name value} or, failing that, an
 * environment variable {@code PEER_NAME} (upper case, '.' and '-' as '_'),
 * else its default. See {@link #usage()}.
 */
public final class PeerApp {
    private PeerApp() {}

    static String usage() {
        return String.join("\n",
            "Usage: java -jar peer-kstreams.jar passthrough|splice [--name value]...",
            "       java -jar peer-kstreams.jar selftest   (the splice against flakestream's codec cases)",
            "",
            "A Kafka Streams 4.4"
                + " exactly_once_v2 app: passthrough copies every record unchanged;",
            "splice numbers JSON orders as flakestream run does (number field, flakestream-number",
            "and flakestream-source headers, bad records to the DLQ), with numbers from a local",
            "per-task counter instead of Redis.",
            "",
            "Settings (flag, else env PEER_<NAME>, else default):",
            "  --brokers HOST:PORT           bootstrap servers (127.0.0.1:9092)",
            "  --input TOPIC                 input topic (required)",
            "  --output TOPIC                output topic (required; must exist)",
            "  --dlq TOPIC                   dead-letter topic of splice (<input>.dlq; must exist)",
            "  --application-id ID           application.id, also the consumer group (flakestream-peer-<mode>)",
            "  --num-stream-threads N        num.stream.threads (" + DEFAULT_THREADS + ")",
            "  --commit-interval-ms MS       commit.interval.ms (100)",
            "  --number-field NAME           JSON field the number goes to (order_no)",
            "  --state-dir DIR               state.dir (a new temporary directory, removed at exit)",
            "  --timeout-s S                 exit by itself after S seconds (1800; never unbounded)",
            "  --config K=V[,K=V]            extra StreamsConfig properties",
            "",
            "Exit: 0 after SIGTERM/SIGINT or the timeout, 1 if the app failed, 2 on a usage error.");
    }

    /**
     * Two stream threads: on this project's shared 2-core machine, 2 and 1
     * measured level within the noise (2 slightly ahead) and 4 slower in 5
     * of 6 comparisons (bench/results/peer-bench.md, the thread sweeps).
     */
    static final int DEFAULT_THREADS = 2;

    public static void main(String[] args) throws Exception {
        if (args.length == 0 || args[0].equals("-h") || args[0].equals("--help")) {
            System.out.println(usage());
            System.exit(args.length == 0 ? 2 : 0);
        }
        String mode = args[0];
        if (mode.equals("selftest")) {
            System.exit(SelfTest.run());
        }
        if (!mode.equals("passthrough") && !mode.equals("splice")) {
            die("unknown mode " + mode + " (want passthrough or splice)");
        }
        Map<String, String> flags = parseFlags(args);
        String input = setting(flags, "input", null);
        String output = setting(flags, "output", null);
        if (input == null || output == null) {
            die("--input and --output are required");
        }
        String dlq = setting(flags, "dlq", input + ".dlq");
        String field = setting(flags, "number-field", "order_no");
        long timeoutS = Long.parseLong(setting(flags, "timeout-s", "1800"));
        if (timeoutS <= 0) {
            die("--timeout-s must be positive");
        }

        String sd = setting(flags, "state-dir", null);

        Properties p = new Properties();
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, setting(flags, "application-id", "flakestream-peer-" + mode));
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, setting(flags, "brokers", "127.0.0.1:9092"));
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        p.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, setting(flags, "num-stream-threads", String.valueOf(DEFAULT_THREADS)));
        p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, setting(flags, "commit-interval-ms", "100"));
        p.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.ByteArraySerde.class);
        p.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.ByteArraySerde.class);
        // A new group reads the backlog from its start, as flakestream's
        // --start-offset earliest does.
        p.put(StreamsConfig.consumerPrefix(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG), "earliest");
        String extra = setting(flags, "config", "");
        for (String kv : extra.split(",")) {
            if (kv.isBlank()) {
                continue;
            }
            int eq = kv.indexOf('=');
            if (eq <= 0) {
                die("--config " + kv + ": want K=V");
            }
            p.put(kv.substring(0, eq).trim(), kv.substring(eq + 1).trim());
        }

        if (!flags.isEmpty()) {
            die("unknown flag(s) " + flags.keySet());
        }

        boolean tempState = sd == null;
        Path stateDir = tempState ? Files.createTempDirectory("peer-kstreams-") : Path.of(sd);
        p.put(StreamsConfig.STATE_DIR_CONFIG, stateDir.toString());

        Topology t = topology(mode, input, output, dlq, field);
        KafkaStreams streams = new KafkaStreams(t, p);
        CountDownLatch done = new CountDownLatch(1);
        AtomicInteger exit = new AtomicInteger();
        streams.setUncaughtExceptionHandler(e -> {
            System.err.println("peer-kstreams: stream thread failed: " + e);
            exit.set(1);
            done.countDown();
            return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        streams.setStateListener((now, before) -> {
            System.err.println("peer-kstreams: state " + before + " -> " + now);
            if (now == KafkaStreams.State.ERROR || now == KafkaStreams.State.NOT_RUNNING) {
                if (now == KafkaStreams.State.ERROR) {
                    exit.set(1);
                }
                done.countDown();
            }
        });
        // A signal starts the JVM's shutdown, which ends when the hooks
        // return: the hook waits (bounded) for main to close the app.
        CountDownLatch closed = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            done.countDown();
            try {
                closed.await(20, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }, "peer-kstreams-signal"));
        System.err.println("peer-kstreams: " + mode + " " + input + " -> " + output + ", " + p);
        streams.start();
        if (!done.await(timeoutS, TimeUnit.SECONDS)) {
            System.err.println("peer-kstreams: timeout " + timeoutS + "s, stopping");
        }
        // Close here, in main, whatever ended the wait: finish or abort the
        // open transactions, leave the group, close the clients; bounded.
        // (A signal's shutdown hook waits for this, see above.)
        streams.close(Duration.ofSeconds(15));
        if (tempState) {
            deleteTree(stateDir);
        }
        System.err.println("peer-kstreams: stopped");
        closed.countDown();
        Runtime.getRuntime().halt(exit.get());
    }

    /** The two forms: one source, one processor (splice only), the sinks. */
    static Topology topology(String mode, String input, String output, String dlq, String field) {
        Topology t = new Topology();
        ByteArrayDeserializer de = new ByteArrayDeserializer();
        ByteArraySerializer ser = new ByteArraySerializer();
        t.addSource("in", de, de, input);
        if (mode.equals("passthrough")) {
            t.addSink("out", output, ser, ser, "in");
            return t;
        }
        t.addProcessor("splice", () -> new Splice(field), "in");
        t.addSink(Splice.OUT, output, ser, ser, "splice");
        t.addSink(Splice.DLQ, dlq, ser, ser, "splice");
        return t;
    }

    static Map<String, String> parseFlags(String[] args) {
        Map<String, String> m = new HashMap<>();
        for (int i = 1; i < args.length; i++) {
            String a = args[i];
            if (!a.startsWith("--")) {
                die("unexpected argument " + a);
            }
            String name = a.substring(2);
            String value;
            int eq = name.indexOf('=');
            if (eq >= 0) {
                value = name.substring(eq + 1);
                name = name.substring(0, eq);
            } else {
                if (i + 1 >= args.length) {
                    die(a + " needs a value");
                }
                value = args[++i];
            }
            m.put(name, value);
        }
        return m;
    }

    static String setting(Map<String, String> flags, String name, String def) {
        String v = flags.remove(name);
        if (v != null) {
            return v;
        }
        v = System.getenv("PEER_" + name.toUpperCase(Locale.ROOT).replace('-', '_').replace('.', '_'));
        return v != null && !v.isEmpty() ? v : def;
    }

    static void die(String msg) {
        System.err.println("peer-kstreams: " + msg + " (see --help)");
        System.exit(2);
    }

    static void deleteTree(Path dir) {
        try (var walk = Files.walk(dir)) {
            walk.sorted(java.util.Comparator.reverseOrder()).forEach(f -> f.toFile().delete());
        } catch (IOException e) {
            System.err.println("peer-kstreams: remove " + dir + ": " + e);
        }
    }
}
