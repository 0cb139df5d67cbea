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

	"github.com/flakestream/flakestream/codec"
	"github.com/flakestream/flakestream/codec/schema"
	"github.com/flakestream/flakestream/eos"
	"github.com/flakestream/flakestream/idgen"
	"github.com/flakestream/flakestream/internal/orders"
	"github.com/flakestream/flakestream/pipeline"
	"github.com/flakestream/flakestream/test/harness"
	"github.com/flakestream/flakestream/test/testenv"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/wait"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"
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
	e := harness.NewEnv(t, kafka, redis, 4)
	e.Produce(t, 20000, orders.Mix{BadPerMille: 6, NumberedPerMille: 5})

	seq, err := idgen.NewRedisSequencer(idgen.RedisSettings{Client: redis.Client(t), Prefix: e.Input})
	if err != nil {
		t.Fatal(err)
	}
	g, err := idgen.New(idgen.Settings{ServerID: 1, WorkerID: 1, Sequencer: seq})
	if err != nil {
		t.Fatal(err)
	}
	w, err := pipeline.NewWorker(eos.Config{Brokers: kafka.Addrs, Topics: []string{e.Input}, Group: e.Group, InstanceID: "containers", MaxPollRecords: 2000, TransactionTimeout: 10 * time.Second, Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))}, pipeline.OutputTopic(e.Output), pipeline.DLQTopic(e.DLQ), pipeline.Numbers(g), pipeline.Codec(e.Codec))
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

// The Avro case on containers: a Confluent Schema Registry container
// (confluentinc/cp-schema-registry:$SCHEMA_REGISTRY_VERSION, default 7.9.0,
// storing its schemas in the Kafka container), Avro orders registered and
// produced to it, numbered by the worker through the real registry, which
// checks the output schema's compatibility itself (BACKWARD, its default);
// the output is exactly once against the Format. Skips without Docker.
func TestContainersAvro(t *testing.T) {
	if err := testenv.DockerAvailable(); err != nil {
		t.Skipf("no Docker engine answers (%s); Docker is optional: the worker's Avro tests run on srfake without it", firstLine(err))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	kafka := &testenv.KafkaCluster{Addrs: []string{kafkaContainer(ctx, t)}, Kind: testenv.KafkaKindExternal}
	redis := redisContainer(ctx, t)
	registry := registryContainer(ctx, t, kafka.Addrs[0])
	e := harness.NewEnv(t, kafka, redis, 4)

	cl, err := sr.NewClient(sr.URLs(registry))
	if err != nil {
		t.Fatal(err)
	}
	id, err := schema.RegisterDemoSchema(ctx, cl, codec.ValueAvro, e.Input+"-value")
	if err != nil {
		t.Fatal(err)
	}
	recs := make([]*kgo.Record, 5000)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: e.Input, Key: []byte(strconv.Itoa(i)),
			Value: schema.AppendDemoOrder(nil, codec.ValueAvro, id, i, time.Now().UnixMilli())}
	}
	recs[100].Value = []byte(`{"not":"framed"}`)
	if err := kafka.Client(t).ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	e.AddInputs(recs)
	f, err := schema.New(schema.Settings{Format: codec.ValueAvro, URL: registry, OutputTopic: e.Output})
	if err != nil {
		t.Fatal(err)
	}
	e.Format = f

	seq, err := idgen.NewRedisSequencer(idgen.RedisSettings{Client: redis.Client(t), Prefix: e.Input})
	if err != nil {
		t.Fatal(err)
	}
	g, err := idgen.New(idgen.Settings{ServerID: 1, WorkerID: 1, Sequencer: seq})
	if err != nil {
		t.Fatal(err)
	}
	w, err := pipeline.NewWorker(eos.Config{Brokers: kafka.Addrs, Topics: []string{e.Input}, Group: e.Group, InstanceID: "containers-avro", TransactionTimeout: 10 * time.Second, Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))}, pipeline.OutputTopic(e.Output), pipeline.DLQTopic(e.DLQ), pipeline.Numbers(g), pipeline.Codec(e.Codec), pipeline.Format(f))
	if err != nil {
		t.Fatal(err)
	}
	wctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(wctx) }()
	if c, ok := e.WaitCommitted(t, 3*time.Minute); !ok {
		t.Errorf("the worker committed %d of %d orders", c, len(recs))
	}
	stop()
	if err := <-done; err != nil {
		t.Errorf("worker: %v", err)
	}
	rep := e.Check(t, 2*time.Minute)
	if !rep.OK() || rep.Numbered != len(recs)-1 || rep.DLQ != 1 {
		t.Fatalf("Avro on the real registry: %s; want %d numbered and 1 dead-lettered, exactly once", rep, len(recs)-1)
	}
	t.Logf("exactly once, Avro through a real Schema Registry: %s", rep)
}

// registryContainer starts a Confluent Schema Registry on the host network
// (so it reaches the Kafka container at its published 127.0.0.1 address)
// on a free port of 127.0.0.1, and returns its URL.
func registryContainer(ctx context.Context, t *testing.T, kafkaAddr string) string {
	t.Helper()
	version := os.Getenv("SCHEMA_REGISTRY_VERSION")
	if version == "" {
		version = "7.9.0"
	}
	port := strconv.Itoa(testenv.FreePort(t))
	c, err := testcontainers.GenericContainer(ctx, testcontainers.GenericContainerRequest{
		ContainerRequest: testcontainers.ContainerRequest{
			Image: "confluentinc/cp-schema-registry:" + version,
			Env: map[string]string{
				"SCHEMA_REGISTRY_HOST_NAME":                           "127.0.0.1",
				"SCHEMA_REGISTRY_LISTENERS":                           "http://127.0.0.1:" + port,
				"SCHEMA_REGISTRY_KAFKASTORE_BOOTSTRAP_SERVERS":        "PLAINTEXT://" + kafkaAddr,
				"SCHEMA_REGISTRY_KAFKASTORE_TOPIC_REPLICATION_FACTOR": "1",
			},
			HostConfigModifier: func(hc *container.HostConfig) { hc.NetworkMode = "host" },
			WaitingFor:         wait.ForLog("Server started, listening for requests").WithStartupTimeout(3 * time.Minute),
		},
		Started: true,
	})
	if c != nil {
		t.Cleanup(func() { _ = testcontainers.TerminateContainer(c) })
	}
	if err != nil {
		t.Fatalf("cp-schema-registry:%s container: %v", version, err)
	}
	return "http://127.0.0.1:" + port
}
