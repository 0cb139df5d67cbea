package cli

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// The principal a refusal line names is the one the broker sees: the SASL
// user for PLAIN and SCRAM; with TLS only, the client certificate's subject
// as Kafka's default principal builder prints it (RFC 2253, the last RDN
// of the certificate's own encoding first, so a subject encoded CN first
// prints CN last); "" (the line says "your principal") where the flags do
// not say it.
func TestPrincipal(t *testing.T) {
	oid := func(o ...int) asn1.ObjectIdentifier { return o }
	cn, ou, o, c := oid(2, 5, 4, 3), oid(2, 5, 4, 11), oid(2, 5, 4, 10), oid(2, 5, 4, 6)
	rdn := func(kv ...any) pkix.RDNSequence {
		var s pkix.RDNSequence
		for i := 0; i < len(kv); i += 2 {
			s = append(s, pkix.RelativeDistinguishedNameSET{{Type: kv[i].(asn1.ObjectIdentifier), Value: kv[i+1]}})
		}
		return s
	}
	dir := t.TempDir()
	usual, usualKey := writeClientCert(t, dir, "usual", rdn(c, "DE", o, "Example", ou, "orders", cn, "worker"))
	cnFirst, cnFirstKey := writeClientCert(t, dir, "cn-first", rdn(cn, "worker", o, "Example, Inc."))
	for _, tc := range []struct {
		name string
		k    kafkaConfig
		want string
	}{
		{"scram", kafkaConfig{saslMechanism: "SCRAM-SHA-512", user: "alice", tlsFiles: tlsFiles{cert: usual, key: usualKey}}, "User:alice"},
		{"plain", kafkaConfig{saslMechanism: "plain", user: "bob"}, "User:bob"},
		{"certificate", kafkaConfig{tlsFiles: tlsFiles{cert: usual, key: usualKey}}, "User:CN=worker,OU=orders,O=Example,C=DE"},
		{"certificate encoded CN first", kafkaConfig{tlsFiles: tlsFiles{cert: cnFirst, key: cnFirstKey}}, `User:O=Example\, Inc.,CN=worker`},
		{"certificate that does not load", kafkaConfig{tlsFiles: tlsFiles{cert: filepath.Join(dir, "none.pem"), key: usualKey}}, ""},
		{"neither", kafkaConfig{}, "User:ANONYMOUS"},
		{"oauthbearer", kafkaConfig{saslMechanism: mechOAuthBearer, user: "ignored"}, ""},
		{"aws_msk_iam", kafkaConfig{saslMechanism: mechAWSMSKIAM}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.k.principal(); got != tc.want {
				t.Errorf("principal %q, want %q", got, tc.want)
			}
		})
	}
}

// writeClientCert writes a self-signed client certificate whose subject is
// encoded as subject, in that order, and its key, and returns their files.
func writeClientCert(t *testing.T, dir, name string, subject pkix.RDNSequence) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := asn1.Marshal(subject)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), RawSubject: raw,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, name+".pem"), filepath.Join(dir, name+".key")
	for f, b := range map[string]*pem.Block{certFile: {Type: "CERTIFICATE", Bytes: der}, keyFile: {Type: "PRIVATE KEY", Bytes: keyDER}} {
		if err := os.WriteFile(f, pem.EncodeToMemory(b), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return certFile, keyFile
}
