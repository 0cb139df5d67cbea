// Package tlskey loads a TLS client certificate whose private key is
// encrypted with a password, as PKCS#8 keeps one (RFC 5958
// EncryptedPrivateKeyInfo, PEM type "ENCRYPTED PRIVATE KEY") with PBES2
// (RFC 8018): PBKDF2 with HMAC-SHA-1, -224, -256, -384 or -512, and
// AES-128, -192 or -256 in CBC mode. That is what `openssl pkcs8 -topk8
// -v2 aes256`, OpenSSL 3's `genpkey -aes256` and Java's keytool write, and
// what Kafka's own clients take with ssl.key.password. The standard
// library reads unencrypted keys only.
//
// PBES1 keys and the legacy OpenSSL encryption ("Proc-Type: 4,ENCRYPTED")
// are refused with ErrUnsupported: both use ciphers and key derivations
// that are broken or deprecated.
package tlskey

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/pbkdf2"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/tls"
	"crypto/x509"
	"encoding/asn1"
	"encoding/pem"
	"errors"
	"fmt"
	"hash"
	"os"
)

var (
	// ErrNoPassword is an encrypted key without a password.
	ErrNoPassword = errors.New("the key is encrypted and no password was given")
	// ErrPassword is a key the password does not decrypt.
	ErrPassword = errors.New("wrong password, or a damaged key")
	// ErrUnsupported is an encryption this package does not read.
	ErrUnsupported = errors.New("unsupported key encryption (want PKCS#8 with PBES2, PBKDF2 and AES-CBC: openssl pkcs8 -topk8 -v2 aes256)")
)

// maxIterations bounds PBKDF2's iteration count, so that a damaged key
// file cannot stall the start: OpenSSL writes 2048, NIST asks for at
// least 1000, OWASP's advice for SHA-256 is 600,000.
const maxIterations = 10_000_000

var (
	oidPBES2      = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 5, 13}
	oidPBKDF2     = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 5, 12}
	oidHMACSHA1   = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 7}
	oidHMACSHA224 = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 8}
	oidHMACSHA256 = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 9}
	oidHMACSHA384 = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 10}
	oidHMACSHA512 = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 11}
	oidAES128CBC  = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 1, 2}
	oidAES192CBC  = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 1, 22}
	oidAES256CBC  = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 1, 42}
)

type algorithmIdentifier struct {
	Algorithm  asn1.ObjectIdentifier
	Parameters asn1.RawValue `asn1:"optional"`
}

type encryptedPrivateKeyInfo struct {
	Algorithm     algorithmIdentifier
	EncryptedData []byte
}

type pbes2Params struct {
	KeyDerivationFunc algorithmIdentifier
	EncryptionScheme  algorithmIdentifier
}

type pbkdf2Params struct {
	Salt       []byte
	Iterations int
	KeyLength  int                 `asn1:"optional"`
	PRF        algorithmIdentifier `asn1:"optional"` // absent: HMAC-SHA-1
}

// LoadX509KeyPair is tls.LoadX509KeyPair for a key that may be encrypted:
// an "ENCRYPTED PRIVATE KEY" is decrypted with password first; any other
// key is read as tls.LoadX509KeyPair reads it, and password is not used.
func LoadX509KeyPair(certFile, keyFile string, password []byte) (tls.Certificate, error) {
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return tls.Certificate{}, err
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return tls.Certificate{}, err
	}
	if keyPEM, err = decryptPEM(keyPEM, password); err != nil {
		return tls.Certificate{}, fmt.Errorf("%s: %w", keyFile, err)
	}
	return tls.X509KeyPair(certPEM, keyPEM)
}

// decryptPEM returns keyPEM with its encrypted private key, if any,
// replaced by the unencrypted PKCS#8 key.
func decryptPEM(keyPEM, password []byte) ([]byte, error) {
	rest := keyPEM
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			return keyPEM, nil // no key at all: tls.X509KeyPair says so
		}
		if block.Headers["Proc-Type"] == "4,ENCRYPTED" {
			return nil, ErrUnsupported
		}
		if block.Type != "ENCRYPTED PRIVATE KEY" {
			continue
		}
		if len(password) == 0 {
			return nil, ErrNoPassword
		}
		der, err := Decrypt(block.Bytes, password)
		if err != nil {
			return nil, err
		}
		return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
	}
}

// Decrypt decrypts a DER EncryptedPrivateKeyInfo with password and returns
// the DER PKCS#8 PrivateKeyInfo, checked to parse.
func Decrypt(der, password []byte) ([]byte, error) {
	var info encryptedPrivateKeyInfo
	if rest, err := asn1.Unmarshal(der, &info); err != nil || len(rest) > 0 {
		return nil, fmt.Errorf("not a PKCS#8 encrypted key: %v", err)
	}
	if !info.Algorithm.Algorithm.Equal(oidPBES2) {
		return nil, fmt.Errorf("%w; this one is %v", ErrUnsupported, info.Algorithm.Algorithm)
	}
	var params pbes2Params
	if _, err := asn1.Unmarshal(info.Algorithm.Parameters.FullBytes, &params); err != nil {
		return nil, fmt.Errorf("PBES2 parameters: %v", err)
	}
	block, err := newCipher(params, password)
	if err != nil {
		return nil, err
	}
	var iv []byte
	if _, err := asn1.Unmarshal(params.EncryptionScheme.Parameters.FullBytes, &iv); err != nil || len(iv) != block.BlockSize() {
		return nil, fmt.Errorf("AES-CBC parameters: want a %d-byte IV", block.BlockSize())
	}
	data := info.EncryptedData
	if len(data) == 0 || len(data)%block.BlockSize() != 0 {
		return nil, ErrPassword
	}
	plain := make([]byte, len(data))
	cipher.NewCBCDecrypter(block, iv).CryptBlocks(plain, data)
	// PKCS#7 padding (RFC 8018 6.1.1): a wrong key leaves other bytes.
	n := int(plain[len(plain)-1])
	if n == 0 || n > block.BlockSize() || !bytes.Equal(plain[len(plain)-n:], bytes.Repeat([]byte{byte(n)}, n)) {
		return nil, ErrPassword
	}
	plain = plain[:len(plain)-n]
	if _, err := x509.ParsePKCS8PrivateKey(plain); err != nil {
		return nil, ErrPassword
	}
	return plain, nil
}

// newCipher derives the AES key from password by PBKDF2 as params say.
func newCipher(params pbes2Params, password []byte) (cipher.Block, error) {
	if !params.KeyDerivationFunc.Algorithm.Equal(oidPBKDF2) {
		return nil, fmt.Errorf("%w; its key derivation is %v", ErrUnsupported, params.KeyDerivationFunc.Algorithm)
	}
	var kdf pbkdf2Params
	if _, err := asn1.Unmarshal(params.KeyDerivationFunc.Parameters.FullBytes, &kdf); err != nil {
		return nil, fmt.Errorf("PBKDF2 parameters: %v", err)
	}
	if kdf.Iterations < 1 || kdf.Iterations > maxIterations {
		return nil, fmt.Errorf("PBKDF2 iteration count %d: want 1 to %d", kdf.Iterations, maxIterations)
	}
	var prf func() hash.Hash
	switch a := kdf.PRF.Algorithm; {
	case len(a) == 0, a.Equal(oidHMACSHA1):
		prf = sha1.New
	case a.Equal(oidHMACSHA224):
		prf = sha256.New224
	case a.Equal(oidHMACSHA256):
		prf = sha256.New
	case a.Equal(oidHMACSHA384):
		prf = sha512.New384
	case a.Equal(oidHMACSHA512):
		prf = sha512.New
	default:
		return nil, fmt.Errorf("%w; its PBKDF2 hash is %v", ErrUnsupported, a)
	}
	var keyLen int
	switch a := params.EncryptionScheme.Algorithm; {
	case a.Equal(oidAES128CBC):
		keyLen = 16
	case a.Equal(oidAES192CBC):
		keyLen = 24
	case a.Equal(oidAES256CBC):
		keyLen = 32
	default:
		return nil, fmt.Errorf("%w; its cipher is %v", ErrUnsupported, a)
	}
	if kdf.KeyLength != 0 && kdf.KeyLength != keyLen {
		return nil, fmt.Errorf("PBKDF2 key length %d for a %d-byte AES key", kdf.KeyLength, keyLen)
	}
	key, err := pbkdf2.Key(prf, string(password), kdf.Salt, kdf.Iterations, keyLen)
	if err != nil {
		return nil, err
	}
	return aes.NewCipher(key)
}
