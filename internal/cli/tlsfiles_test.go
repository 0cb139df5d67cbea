package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The registry's TLS files go through the same tlsFiles as Kafka's, and
// each error names the registry's own flag.
func TestRegistryTLSFiles(t *testing.T) {
	dir := t.TempDir()
	_, caPEM := selfSigned(t)
	ca := filepath.Join(dir, "ca.pem")
	notPEM := filepath.Join(dir, "not.pem")
	if err := os.WriteFile(ca, caPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(notPEM, []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	newConfig := func(ca, cert string) *schemaConfig {
		sc := &schemaConfig{}
		sc.flags() // names the files' flags
		sc.tlsFiles.ca, sc.tlsFiles.cert = ca, cert
		return sc
	}
	if cfg, err := newConfig("", "").tls(); cfg != nil || err != nil {
		t.Fatalf("no files: %v, %v; want Go's defaults (nil, nil)", cfg, err)
	}
	cfg, err := newConfig(ca, "").tls()
	if err != nil || cfg == nil || cfg.RootCAs == nil {
		t.Fatalf("a CA: %v, %v; want a configuration trusting it", cfg, err)
	}
	for _, c := range []struct{ ca, cert, want string }{
		{filepath.Join(dir, "missing.pem"), "", "--schema-registry-tls-ca: "},
		{notPEM, "", "--schema-registry-tls-ca " + notPEM + ": no PEM certificate in it"},
		{"", notPEM, "--schema-registry-tls-cert/--schema-registry-tls-key: "},
	} {
		if _, err := newConfig(c.ca, c.cert).tls(); err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("ca %q cert %q: %v, want an error starting %q", c.ca, c.cert, err, c.want)
		}
	}
}
