package testenv

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"sync"
	"testing"
	"time"
)

// OIDC is an OpenID Connect provider for tests, on 127.0.0.1: a JWKS
// endpoint (JWKSURL) with one RSA key, and a token endpoint (TokenURL)
// that gives the clients added to it RS256-signed JWTs by the client
// credentials grant, as a broker's OAUTHBEARER listener validates them
// (KafkaOAuth). It stops at the end of the test.
type OIDC struct {
	URL      string        // http://127.0.0.1:PORT
	Issuer   string        // the iss claim of every token (URL)
	Audience string        // the aud claim, unless a client says otherwise
	Lifetime time.Duration // of every token (its exp and expires_in)

	kid     string
	key     *rsa.PrivateKey // its public half is the JWKS
	foreign *rsa.PrivateKey // in no JWKS (OIDCClient.ForeignKey)

	mu      sync.Mutex
	clients map[string]OIDCClient
	issued  map[string][]time.Time
}

// OIDCClient is a client of the OIDC provider.
type OIDCClient struct {
	ID, Secret string
	Subject    string // the sub claim, which the broker takes as the principal User:<Subject>
	Audience   string // the aud claim; "" is the provider's Audience
	// ForeignKey signs the client's tokens with a key that is not in the
	// JWKS, under the JWKS key's ID: a forged token.
	ForeignKey bool
}

// NewOIDC starts an OIDC provider whose tokens name audience and live for
// lifetime.
func NewOIDC(t testing.TB, audience string, lifetime time.Duration) *OIDC {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatalf("testenv: oidc key: %v", err)
	}
	foreign, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatalf("testenv: oidc key: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("testenv: oidc listen: %v", err)
	}
	o := &OIDC{URL: "http://" + ln.Addr().String(), Audience: audience, Lifetime: lifetime,
		kid: "test-" + kafkaRandomHex(4), key: key, foreign: foreign,
		clients: map[string]OIDCClient{}, issued: map[string][]time.Time{}}
	o.Issuer = o.URL
	mux := http.NewServeMux()
	mux.HandleFunc("GET /jwks", o.serveJWKS)
	mux.HandleFunc("POST /token", o.serveToken)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return o
}

// JWKSURL is the URL of the provider's JWKS.
func (o *OIDC) JWKSURL() string { return o.URL + "/jwks" }

// TokenURL is the URL of the provider's token endpoint.
func (o *OIDC) TokenURL() string { return o.URL + "/token" }

// AddClient registers c.
func (o *OIDC) AddClient(c OIDCClient) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.clients[c.ID] = c
}

// Issued is when client id was given each of its tokens, oldest first.
func (o *OIDC) Issued(id string) []time.Time {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]time.Time(nil), o.issued[id]...)
}

var b64 = base64.RawURLEncoding

func (o *OIDC) serveJWKS(w http.ResponseWriter, _ *http.Request) {
	pub := o.key.PublicKey
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"keys": []map[string]string{{
		"kty": "RSA", "use": "sig", "alg": "RS256", "kid": o.kid,
		"n": b64.EncodeToString(pub.N.Bytes()), "e": b64.EncodeToString(big.NewInt(int64(pub.E)).Bytes()),
	}}})
}

// serveToken answers the client credentials grant (RFC 6749 4.4), the
// client authenticated by HTTP basic auth or in the form.
func (o *OIDC) serveToken(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	fail := func(status int, code string) {
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(map[string]string{"error": code})
	}
	if err := r.ParseForm(); err != nil || r.PostForm.Get("grant_type") != "client_credentials" {
		fail(http.StatusBadRequest, "unsupported_grant_type")
		return
	}
	id, secret, basic := r.BasicAuth()
	if basic { // RFC 6749 2.3.1: form-encoded, then basic auth
		id, _ = url.QueryUnescape(id)
		secret, _ = url.QueryUnescape(secret)
	} else {
		id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
	}
	o.mu.Lock()
	c, ok := o.clients[id]
	if ok && c.Secret == secret {
		o.issued[id] = append(o.issued[id], time.Now())
	}
	o.mu.Unlock()
	if !ok || c.Secret != secret {
		fail(http.StatusUnauthorized, "invalid_client")
		return
	}
	tok, err := o.token(c, r.PostForm.Get("scope"))
	if err != nil {
		fail(http.StatusInternalServerError, "server_error")
		return
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"access_token": tok, "token_type": "Bearer",
		"expires_in": int(o.Lifetime / time.Second)})
}

// token is a JWT for c: header and claims in base64url JSON, signed
// RS256 (RFC 7515, 7518 3.3).
func (o *OIDC) token(c OIDCClient, scope string) (string, error) {
	aud := c.Audience
	if aud == "" {
		aud = o.Audience
	}
	now := time.Now()
	claims := map[string]any{"iss": o.Issuer, "sub": c.Subject, "aud": aud, "iat": now.Unix(),
		"nbf": now.Unix(), "exp": now.Add(o.Lifetime).Unix(), "jti": kafkaRandomHex(8), "client_id": c.ID}
	if scope != "" {
		claims["scope"] = scope
	}
	header, err := json.Marshal(map[string]string{"alg": "RS256", "typ": "JWT", "kid": o.kid})
	if err != nil {
		return "", err
	}
	body, err := json.Marshal(claims)
	if err != nil {
		return "", err
	}
	signed := b64.EncodeToString(header) + "." + b64.EncodeToString(body)
	key := o.key
	if c.ForeignKey {
		key = o.foreign
	}
	sum := sha256.Sum256([]byte(signed))
	sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, sum[:])
	if err != nil {
		return "", err
	}
	return signed + "." + b64.EncodeToString(sig), nil
}
