package kprobe

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/flakestream/flakestream/test/testenv"
	"github.com/twmb/franz-go/pkg/kfake"
)

// kfakeAddr starts an in-process Kafka, over TLS when cfg is not nil, and
// returns its address.
func kfakeAddr(t *testing.T, cfg *tls.Config) string {
	t.Helper()
	opts := []kfake.Opt{kfake.NumBrokers(1)}
	if cfg != nil {
		opts = append(opts, kfake.TLS(cfg))
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c.ListenAddrs()[0]
}

// listen accepts connections on a free port and hands each to serve.
func listen(t *testing.T, serve func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go serve(c)
		}
	}()
	return ln.Addr().String()
}

// Each address is told for what it is, by the first bytes it answers.
func TestProbe(t *testing.T) {
	// The silent listener's cases wait this long, so it is short; but a
	// TLS handshake on a starved machine (under -race) takes a good part
	// of a second, and 300 ms took one for silence. The real-broker test
	// runs with the default.
	defaultQuiet := quiet
	quiet = 2 * time.Second
	t.Cleanup(func() { quiet = defaultQuiet })
	// httptest's TLS server gives a certificate for 127.0.0.1 and a pool
	// that trusts it.
	https := httptest.NewTLSServer(http.NotFoundHandler())
	defer https.Close()
	serverTLS := &tls.Config{Certificates: https.TLS.Certificates}
	trusting := &tls.Config{RootCAs: https.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs}
	plainKafka, tlsKafka := kfakeAddr(t, nil), kfakeAddr(t, serverTLS)
	httpSrv := httptest.NewServer(http.NotFoundHandler())
	defer httpSrv.Close()
	silent := listen(t, func(c net.Conn) { time.Sleep(5 * time.Second); c.Close() })
	closing := listen(t, func(c net.Conn) { c.Close() })
	// A port just freed, so that nothing listens on it.
	free, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedPort := free.Addr().String()
	free.Close()

	cases := []struct {
		name string
		addr string
		tls  *tls.Config
		kind Kind
		what string
	}{
		{"kafka", plainKafka, nil, Kafka, "is Kafka"},
		{"kafka over tls", tlsKafka, trusting, Kafka, "is Kafka"},
		{"tls listener without tls", tlsKafka, nil, TLSMismatch, "looks like TLS; set --kafka-tls"},
		{"plaintext listener with tls", plainKafka, trusting, TLSMismatch, "answers Kafka without TLS; drop --kafka-tls"},
		{"untrusted certificate", tlsKafka, &tls.Config{RootCAs: x509.NewCertPool()}, NotKafka, "TLS handshake failed: tls: failed to verify certificate"},
		{"redis", testenv.RedisServer(t).Addr, nil, NotKafka, "answered but is not Kafka (it looks like Redis)"},
		{"http", strings.TrimPrefix(httpSrv.URL, "http://"), nil, NotKafka, "answered but is not Kafka (it looks like HTTP)"},
		{"silent", silent, nil, Unreachable, "accepted the connection but answered nothing"},
		{"closing", closing, nil, Unreachable, "closed the connection without answering"},
		{"refused", closedPort, nil, Unreachable, "connection refused"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := Probe(context.Background(), c.addr, c.tls, 10*time.Second)
			if f.Kind != c.kind || !strings.HasPrefix(f.What, c.what) || f.Addr != c.addr {
				t.Fatalf("Probe(%s) = %d %q; want %d %q", c.addr, f.Kind, f.What, c.kind, c.what)
			}
		})
	}
}

// Apache Kafka's own listeners: a plaintext one reached with TLS, and a
// SASL_SSL one reached without, each named for what it is. Java's TLS
// engine answers plaintext differently from Go's, so kfake does not stand
// in for this.
func TestProbeRealKafka(t *testing.T) {
	plain := testenv.RealKafka(t)
	secured := testenv.RealKafka(t, testenv.KafkaSecured(testenv.ClientAuthNone))
	mtls := testenv.RealKafka(t, testenv.KafkaSecured(testenv.ClientAuthRequired))
	pem, err := os.ReadFile(secured.Secure().CA)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		t.Fatal("no CA certificate in " + secured.Secure().CA)
	}
	trusting := &tls.Config{RootCAs: pool}
	cases := []struct {
		name string
		addr string
		tls  *tls.Config
		kind Kind
		what string
	}{
		{"plaintext", plain.Addrs[0], nil, Kafka, "is Kafka"},
		{"plaintext with tls", plain.Addrs[0], trusting, TLSMismatch, "answers Kafka without TLS; drop --kafka-tls"},
		{"sasl_ssl", secured.Addrs[0], trusting, Kafka, "is Kafka"},
		{"sasl_ssl without tls", secured.Addrs[0], nil, TLSMismatch, "looks like TLS; set --kafka-tls"},
		{"client certificate required, none given", mtls.Addrs[0], &tls.Config{RootCAs: mtlsPool(t, mtls)}, NotKafka, "refused the TLS session (tls: "},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := Probe(context.Background(), c.addr, c.tls, 10*time.Second)
			if f.Kind != c.kind || !strings.HasPrefix(f.What, c.what) {
				t.Fatalf("Probe(%s) = %d %q; want %d %q", c.addr, f.Kind, f.What, c.kind, c.what)
			}
		})
	}
}

// mtlsPool trusts the CA of the secured broker k.
func mtlsPool(t *testing.T, k *testenv.KafkaCluster) *x509.CertPool {
	t.Helper()
	pem, err := os.ReadFile(k.Secure().CA)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		t.Fatal("no CA certificate in " + k.Secure().CA)
	}
	return pool
}
