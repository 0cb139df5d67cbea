package cli

import (
	"context"
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/flakestream/flakestream/internal/orders"
	"github.com/flakestream/flakestream/test/harness"
	"github.com/flakestream/flakestream/test/testenv"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// A broker whose certificate names kafka.flakestream.test, not the
// 127.0.0.1 the worker dials: with --kafka-tls-server-name the worker
// numbers every order; the same settings without it fail the handshake.
func TestRunKafkaTLSServerName(t *testing.T) {
	const name = "kafka.flakestream.test"
	ca := testenv.NewTestCA(t)
	certFile, keyFile := ca.Issue(t, "kafka", name)
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.TLS(&tls.Config{Certificates: []tls.Certificate{pair}}),
		kfake.SeedTopics(2, "orders", "orders.numbered", "orders.dlq"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	k := &kafkaConfig{}
	k.flags()
	k.tlsFiles.ca = ca.File
	opts, err := k.opts()
	if err != nil {
		t.Fatal(err)
	}
	noName, err := kgo.NewClient(append(opts, kgo.SeedBrokers(c.ListenAddrs()...))...)
	if err != nil {
		t.Fatal(err)
	}
	pingCtx, pingCancel := context.WithTimeout(ctx, 10*time.Second)
	err = noName.Ping(pingCtx)
	pingCancel()
	noName.Close()
	if err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("without the server name: %v, want a certificate error", err)
	}

	secure := []kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...), kgo.DialTLSConfig(ca.ClientConfig(t, name, "", ""))}
	prod, err := kgo.NewClient(secure...)
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	recs := orders.Records("orders", 2, 50, orders.Mix{}, 100, 0)
	if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	w := startApp(t, "run", "--brokers", c.ListenAddrs()[0], "--kafka-tls-ca", ca.File, "--kafka-tls-server-name", name,
		"--input-topic", "orders", "--output-topic", "orders.numbered", "--sequencer", "memory",
		"--server-id", "1", "--worker-id", "1", "--http-addr", "")
	cons, err := kgo.NewClient(append(secure, kgo.ConsumeTopics("orders.numbered"), kgo.FetchIsolationLevel(kgo.ReadCommitted()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	for got := 0; got < len(recs); {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d numbered orders; worker log:\n%s", got, len(recs), harness.Tail(w.stderr.String(), 2000))
		}
		got += fs.NumRecords()
	}
	if code, err := w.stop(20 * time.Second); err != nil || code != 0 {
		t.Fatalf("exit %d, %v:\n%s", code, err, harness.Tail(w.stderr.String(), 2000))
	}
}

// --schema-registry-tls-server-name goes into the registry's TLS
// configuration: an https registry whose certificate names only
// registry.flakestream.test answers at 127.0.0.1 with it, and fails the
// handshake without it.
func TestRegistryTLSServerName(t *testing.T) {
	const name = "registry.flakestream.test"
	ca := testenv.NewTestCA(t)
	certFile, keyFile := ca.Issue(t, "registry", name)
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("[]")) }))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{pair}}
	srv.StartTLS()
	defer srv.Close()
	get := func(serverName string) error {
		sc := &schemaConfig{}
		sc.flags()
		sc.tlsFiles.ca, sc.tlsFiles.serverName = ca.File, serverName
		cfg, err := sc.tls()
		if err != nil {
			t.Fatal(err)
		}
		cl := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}, Timeout: 10 * time.Second}
		res, err := cl.Get(srv.URL + "/subjects")
		if err == nil {
			res.Body.Close()
		}
		return err
	}
	if err := get(name); err != nil {
		t.Errorf("with the server name: %v", err)
	}
	if err := get(""); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("without the server name: %v, want a certificate error", err)
	}
}
