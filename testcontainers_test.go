package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flakestream/flakestream/idgen"
	"github.com/flakestream/flakestream/internal/e2e"
	"github.com/flakestream/flakestream/internal/orders"
	"github.com/flakestream/flakestream/internal/testenv"
	"github.com/flakestream/flakestream/pipeline"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/wait"
)

// The end-to-end test on containers, for machines with a Docker engine: an
// Apache Kafka container (KRaft, apache/kafka:$KAFKA_VERSION, default the
// version scripts/kafka-local runs) and a Redis container; the worker runs
// in-process (pipeline.NewWorker) on them, numbers orders of every kind,
// and the output is checked exactly once with internal/verify. Without a
// Docker engine it skips, even under CI=true: Docker is optional, and `make
// test-kafka` runs the end-to-end suite on a real broker without it.
func TestContainersEndToEnd(t *testing.T) {
	if err := testenv.DockerAvailable(); err != nil {
		t.Skipf("no Docker engine answers (%s); Docker is optional: make test-kafka runs the end-to-end suite on a real broker without it", firstLine(err))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	kafka := &testenv.KafkaCluster{Addrs: []string{kafkaContainer(ctx, t)}, Kind: testenv.KafkaKindExternal}
	redis := redisContainer(ctx, t)
	e := e2e.NewEnv(t, kafka, redis, 4)
	e.Produce(t, 20000, orders.Mix{BadPerMille: 6, NumberedPerMille: 5})

	seq, err := idgen.NewRedisSequencer(idgen.RedisSettings{Client: redis.Client(t), Prefix: e.Input})
	if err != nil {
		t.Fatal(err)
	}
	g, err := idgen.New(idgen.Settings{ServerID: 1, WorkerID: 1, Sequencer: seq})
	if err != nil {
		t.Fatal(err)
	}
	w, err := pipeline.NewWorker(pipeline.Brokers(kafka.Addrs...), pipeline.InputTopics(e.Input),
		pipeline.OutputTopic(e.Output), pipeline.DLQTopic(e.DLQ), pipeline.Group(e.Group),
		pipeline.InstanceID("containers"), pipeline.Numbers(g), pipeline.Codec(e.Codec),
		pipeline.MaxPollRecords(2000), pipeline.TransactionTimeout(10*time.Second),
		pipeline.Logger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))))
	if err != nil {
		t.Fatal(err)
	}
	wctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(wctx) }()
	if c, ok := e.WaitCommitted(t, 3*time.Minute); !ok {
		t.Errorf("the worker committed %d of %d orders", c, len(e.Inputs()))
	}
	stop()
	if err := <-done; err != nil {
		t.Errorf("worker: %v", err)
	}
	rep := e.Check(t, 2*time.Minute)
	if !rep.OK() {
		t.Fatalf("not exactly once on the containers: %s", rep)
	}
	t.Logf("exactly once on apache/kafka and redis containers: %s", rep)
}

func firstLine(err error) string {
	s, _, _ := strings.Cut(strings.TrimSpace(err.Error()), "\n")
	return s
}

// kafkaContainer starts a single-node KRaft broker and returns its
// bootstrap address. The broker must advertise an address the test can
// reach, known before it starts, so the container listens on a free port P
// and publishes it as 127.0.0.1:P.
func kafkaContainer(ctx context.Context, t *testing.T) string {
	t.Helper()
	version := os.Getenv("KAFKA_VERSION")
	if version == "" {
		version = "4.4.0"
	}
	port := testenv.FreePort(t)
	p := strconv.Itoa(port)
	c, err := testcontainers.GenericContainer(ctx, testcontainers.GenericContainerRequest{
		ContainerRequest: testcontainers.ContainerRequest{
			Image:        "apache/kafka:" + version,
			ExposedPorts: []string{p + "/tcp"},
			Env: map[string]string{
				"KAFKA_NODE_ID":                                  "1",
				"KAFKA_PROCESS_ROLES":                            "broker,controller",
				"CLUSTER_ID":                                     "kwz4glq7QfeeHN-2KcnAPw",
				"KAFKA_CONTROLLER_QUORUM_VOTERS":                 "1@localhost:9093",
				"KAFKA_LISTENERS":                                "PLAINTEXT://:" + p + ",CONTROLLER://:9093",
				"KAFKA_ADVERTISED_LISTENERS":                     "PLAINTEXT://127.0.0.1:" + p,
				"KAFKA_LISTENER_SECURITY_PROTOCOL_MAP":           "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
				"KAFKA_INTER_BROKER_LISTENER_NAME":               "PLAINTEXT",
				"KAFKA_CONTROLLER_LISTENER_NAMES":                "CONTROLLER",
				"KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR":         "1",
				"KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR": "1",
				"KAFKA_TRANSACTION_STATE_LOG_MIN_ISR":            "1",
				"KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS":         "0",
			},
			HostConfigModifier: func(hc *container.HostConfig) {
				hc.PortBindings = network.PortMap{
					network.MustParsePort(p + "/tcp"): {{HostIP: netip.MustParseAddr("127.0.0.1"), HostPort: p}},
				}
			},
			WaitingFor: wait.ForLog("Kafka Server started").WithStartupTimeout(3 * time.Minute),
		},
		Started: true,
	})
	if c != nil {
		t.Cleanup(func() { _ = testcontainers.TerminateContainer(c) })
	}
	if err != nil {
		t.Fatalf("apache/kafka:%s container: %v", version, err)
	}
	return "127.0.0.1:" + p
}

// redisContainer starts redis:7 with an append-only file.
func redisContainer(ctx context.Context, t *testing.T) *testenv.Redis {
	t.Helper()
	c, err := testcontainers.GenericContainer(ctx, testcontainers.GenericContainerRequest{
		ContainerRequest: testcontainers.ContainerRequest{
			Image:        "redis:7",
			Cmd:          []string{"redis-server", "--appendonly", "yes", "--save", ""},
			ExposedPorts: []string{"6379/tcp"},
			WaitingFor:   wait.ForListeningPort("6379/tcp"),
		},
		Started: true,
	})
	if c != nil {
		t.Cleanup(func() { _ = testcontainers.TerminateContainer(c) })
	}
	if err != nil {
		t.Fatalf("redis container: %v", err)
	}
	ep, err := c.PortEndpoint(ctx, "6379/tcp", "")
	if err != nil {
		t.Fatalf("redis container endpoint: %v", err)
	}
	return &testenv.Redis{URL: fmt.Sprintf("redis://%s/0", ep), Addr: ep, Kind: "container"}
}
