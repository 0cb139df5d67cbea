package tlskey

import (
	"crypto/ecdsa"
	"crypto/tls"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// The password of the keys in testdata, which OpenSSL 3 encrypted from one
// P-256 key (plain.key), the certificate client.pem:
//
//	openssl pkcs8 -topk8 -in plain.key -v2 aes256 -v2prf hmacWithSHA256 -passout pass:$P -out aes256-sha256.key
//	openssl pkcs8 -topk8 -in plain.key -v2 aes128 -v2prf hmacWithSHA1 -passout pass:$P -out aes128-sha1.key
//	openssl pkcs8 -topk8 -in plain.key -v2 aes192 -v2prf hmacWithSHA512 -passout pass:$P -out aes192-sha512.key
//	openssl pkcs8 -topk8 -in plain.key -v1 PBE-SHA1-3DES -passout pass:$P -out pbes1.key
const testPassword = "flakestream-test-pass"

func td(name string) string { return filepath.Join("testdata", name) }

// Every PBES2 key OpenSSL writes (AES-128/192/256, the PBKDF2 hashes,
// SHA-1 as the default it leaves out) decrypts with the password to the
// key of the certificate; an unencrypted key loads with or without one.
func TestLoadX509KeyPair(t *testing.T) {
	want, err := tls.LoadX509KeyPair(td("client.pem"), td("plain.key"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ key, password string }{
		{"aes256-sha256.key", testPassword},
		{"aes128-sha1.key", testPassword},
		{"aes192-sha512.key", testPassword},
		{"plain.key", ""},
		{"plain.key", testPassword},
	} {
		pair, err := LoadX509KeyPair(td("client.pem"), td(c.key), []byte(c.password))
		if err != nil {
			t.Errorf("%s: %v", c.key, err)
			continue
		}
		got, ok := pair.PrivateKey.(*ecdsa.PrivateKey)
		if !ok || !got.Equal(want.PrivateKey) {
			t.Errorf("%s: decrypted to another key (%T)", c.key, pair.PrivateKey)
		}
	}
}

// A wrong or missing password, PBES1, the legacy OpenSSL encryption and a
// damaged key are errors that say which; none is a panic.
func TestLoadX509KeyPairErrors(t *testing.T) {
	legacy := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: []byte{1, 2, 3},
		Headers: map[string]string{"Proc-Type": "4,ENCRYPTED", "DEK-Info": "AES-128-CBC,00112233445566778899AABBCCDDEEFF"}})
	enc, err := os.ReadFile(td("aes256-sha256.key"))
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(enc)
	block.Bytes[len(block.Bytes)-1] ^= 0xff // the last cipher block: its padding
	damaged := pem.EncodeToMemory(block)
	dir := t.TempDir()
	for name, b := range map[string][]byte{"legacy.key": legacy, "damaged.key": damaged} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		key, password string
		want          error
	}{
		{td("aes256-sha256.key"), "wrong", ErrPassword},
		{td("aes128-sha1.key"), "", ErrNoPassword},
		{td("pbes1.key"), testPassword, ErrUnsupported},
		{filepath.Join(dir, "legacy.key"), testPassword, ErrUnsupported},
		{filepath.Join(dir, "damaged.key"), testPassword, ErrPassword},
	} {
		_, err := LoadX509KeyPair(td("client.pem"), c.key, []byte(c.password))
		if !errors.Is(err, c.want) {
			t.Errorf("%s with %q: %v, want %v", c.key, c.password, err, c.want)
		}
	}
}

// Decrypt reads only what it is given: any bytes are an error or a key,
// never a panic (run with -fuzz to look further).
func FuzzDecrypt(f *testing.F) {
	for _, name := range []string{"aes256-sha256.key", "aes128-sha1.key", "pbes1.key"} {
		b, err := os.ReadFile(td(name))
		if err != nil {
			f.Fatal(err)
		}
		block, _ := pem.Decode(b)
		f.Add(block.Bytes)
	}
	f.Fuzz(func(t *testing.T, der []byte) {
		_, _ = Decrypt(der, []byte(testPassword))
	})
}
