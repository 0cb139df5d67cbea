package cli

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flakestream/flakestream/internal/orders"
	"github.com/flakestream/flakestream/test/harness"
	"github.com/flakestream/flakestream/test/testenv"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// selfSigned returns a TLS certificate for 127.0.0.1 and the PEM of the CA
// (itself) that clients must trust.
func selfSigned(t *testing.T) (tls.Certificate, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "flakestream test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	pair, err := tls.X509KeyPair(certPEM, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}))
	if err != nil {
		t.Fatal(err)
	}
	return pair, certPEM
}

// The worker talks to a broker over TLS with each SASL mechanism it offers,
// given only the flags a user would pass: --kafka-tls-ca, --sasl-mechanism,
// --sasl-user and FLAKESTREAM_SASL_PASSWORD.
func TestRunOverTLSWithSASL(t *testing.T) {
	redis := testenv.RedisServer(t)
	cert, caPEM := selfSigned(t)
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, caPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	for _, mech := range []string{"plain", "scram-sha-256", "scram-sha-512"} {
		t.Run(mech, func(t *testing.T) {
			kfakeMech := map[string]string{"plain": "PLAIN", "scram-sha-256": "SCRAM-SHA-256", "scram-sha-512": "SCRAM-SHA-512"}[mech]
			c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.TLS(&tls.Config{Certificates: []tls.Certificate{cert}}),
				kfake.EnableSASL(), kfake.Superuser(kfakeMech, "flakestream", "s3cret"),
				kfake.SeedTopics(2, "orders", "orders.numbered", "orders.dlq"))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			auth := kgo.SASL(plain.Auth{User: "flakestream", Pass: "s3cret"}.AsMechanism())
			switch mech {
			case "scram-sha-256":
				auth = kgo.SASL(scram.Auth{User: "flakestream", Pass: "s3cret"}.AsSha256Mechanism())
			case "scram-sha-512":
				auth = kgo.SASL(scram.Auth{User: "flakestream", Pass: "s3cret"}.AsSha512Mechanism())
			}
			secure := []kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...), kgo.DialTLSConfig(&tls.Config{RootCAs: pool}), auth}
			prod, err := kgo.NewClient(append(secure, kgo.DefaultProduceTopic("orders"))...)
			if err != nil {
				t.Fatal(err)
			}
			defer prod.Close()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			recs := orders.Records("orders", 2, 50, orders.Mix{}, 200, 0)
			for _, r := range recs {
				r.Partition = -1
			}
			if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
				t.Fatalf("produce over TLS with %s: %v", mech, err)
			}

			t.Setenv("FLAKESTREAM_SASL_PASSWORD", "s3cret")
			w := startApp(t, "run", "--brokers", strings.Join(c.ListenAddrs(), ","), "--kafka-tls-ca", caFile,
				"--sasl-mechanism", mech, "--sasl-user", "flakestream",
				"--input-topic", "orders", "--output-topic", "orders.numbered", "--redis", redis.URL,
				"--redis-prefix", "tls-"+mech, "--server-id", "1", "--worker-id", "1", "--http-addr", "")

			cons, err := kgo.NewClient(append(secure, kgo.ConsumeTopics("orders.numbered"),
				kgo.FetchIsolationLevel(kgo.ReadCommitted()))...)
			if err != nil {
				t.Fatal(err)
			}
			defer cons.Close()
			got := 0
			for got < len(recs) {
				fs := cons.PollFetches(ctx)
				if ctx.Err() != nil {
					t.Fatalf("read %d of %d numbered orders over TLS with %s; worker log:\n%s", got, len(recs), mech, harness.Tail(w.stderr.String(), 2000))
				}
				fs.EachRecord(func(r *kgo.Record) {
					if len(r.Headers) == 0 || r.Headers[len(r.Headers)-2].Key != "flakestream-number" {
						t.Fatalf("record without a number header: %v", r.Headers)
					}
					got++
				})
			}
			if code, err := w.stop(20 * time.Second); err != nil || code != 0 {
				t.Fatalf("exit %d, %v, after the end of its context:\n%s", code, err, harness.Tail(w.stderr.String(), 2000))
			}

		})
	}
}
