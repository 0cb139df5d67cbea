package cli

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/flakestream/flakestream/test/testenv"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// A broker that requires a client certificate: with the certificate's key
// encrypted (PKCS#8, AES-256) and --kafka-tls-key-password the client
// signs the handshake; a wrong or missing password is one line that names
// the flag, before any broker is asked.
func TestKafkaTLSEncryptedKey(t *testing.T) {
	const dir = "../tlskey/testdata/"
	clientPEM, err := os.ReadFile(dir + "client.pem")
	if err != nil {
		t.Fatal(err)
	}
	clients := x509.NewCertPool()
	clients.AppendCertsFromPEM(clientPEM)
	ca := testenv.NewTestCA(t)
	certFile, keyFile := ca.Issue(t, "kafka", "127.0.0.1")
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.TLS(&tls.Config{Certificates: []tls.Certificate{pair},
		ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: clients}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	for _, tc := range []struct{ password, wantErr string }{
		{"flakestream-test-pass", ""},
		{"wrong", "wrong password, or a damaged key (check --kafka-tls-key-password)"},
		{"", "the key is encrypted and no password was given (check --kafka-tls-key-password)"},
	} {
		k := &kafkaConfig{}
		k.flags()
		k.tlsFiles.ca, k.tlsFiles.cert, k.tlsFiles.key, k.tlsFiles.keyPassword = ca.File, dir+"client.pem", dir+"aes256-sha256.key", tc.password
		opts, err := k.opts()
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || strings.Contains(err.Error(), "\n") {
				t.Errorf("password %q: %v, want one line with %q", tc.password, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Fatalf("password %q: %v", tc.password, err)
		}
		cl, err := kgo.NewClient(append(opts, kgo.SeedBrokers(c.ListenAddrs()...))...)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		err = cl.Ping(ctx)
		cancel()
		cl.Close()
		if err != nil {
			t.Errorf("with the decrypted key: %v", err)
		}
	}
}
