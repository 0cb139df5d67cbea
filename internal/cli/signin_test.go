package cli

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// tokenEndpoint is an OIDC provider's token endpoint for one client: it
// checks the client credentials grant (client ID and secret by basic
// auth, the scopes) and answers tokens tok-1, tok-2, ... that expire in
// lifetime, or status with an OAuth error when status is not 200.
func tokenEndpoint(t *testing.T, id, secret, scope string, lifetime time.Duration, status int) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, pass, ok := r.BasicAuth()
		err := r.ParseForm()
		if !ok { // client_secret_post, which x/oauth2 tries after basic auth is refused
			user, pass = r.Form.Get("client_id"), r.Form.Get("client_secret")
		}
		if err != nil || r.Method != http.MethodPost || r.Form.Get("grant_type") != "client_credentials" ||
			user != id || pass != secret || r.Form.Get("scope") != scope {
			t.Errorf("token request %s %v (client %q)", r.Method, r.Form, user)
		}
		w.Header().Set("Content-Type", "application/json")
		if status != http.StatusOK {
			w.WriteHeader(status)
			_, _ = w.Write([]byte(`{"error":"invalid_client","error_description":"unknown client"}`))
			return
		}
		_, _ = fmt.Fprintf(w, `{"access_token":"tok-%d","token_type":"Bearer","expires_in":%d}`, n.Add(1), int(lifetime.Seconds()))
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

// The OAUTHBEARER mechanism signs in with a token fetched by the client
// credentials grant (client ID, secret, scopes), keeps it for 80% of its
// lifetime and then fetches a new one, so no sign-in uses a token close to
// its expiry. The clock is the test's.
func TestOAuthTokenRefresh(t *testing.T) {
	srv, fetched := tokenEndpoint(t, "flakestream", "client-s3cret", "kafka orders", 100*time.Second, http.StatusOK)
	src := newOAuthSource(srv.URL+"/token", "flakestream", "client-s3cret", "kafka,orders")
	now := time.Now()
	src.now = func() time.Time { return now }
	mech := oauthMechanism(src)
	ctx := context.Background()
	start := now
	for _, c := range []struct {
		after   time.Duration
		want    string
		fetches int64
	}{{0, "tok-1", 1}, {10 * time.Second, "tok-1", 1}, {79 * time.Second, "tok-1", 1}, {81 * time.Second, "tok-2", 2}, {81*time.Second + 79*time.Second, "tok-2", 2}, {81*time.Second + 81*time.Second, "tok-3", 3}} {
		now = start.Add(c.after)
		_, msg, err := mech.Authenticate(ctx, "broker:9093")
		if err != nil {
			t.Fatalf("at +%s: %v", c.after, err)
		}
		if !strings.Contains(string(msg), "auth=Bearer "+c.want+"\x01") {
			t.Errorf("at +%s: client message %q, want the bearer token %s", c.after, msg, c.want)
		}
		if got := fetched.Load(); got != c.fetches {
			t.Errorf("at +%s: %d tokens fetched, want %d", c.after, got, c.fetches)
		}
	}
}

// A provider that refuses the client is one line with its answer, which
// names the endpoint and the client but not the secret; missing settings
// and a token URL that is no URL are usage errors.
func TestOAuthErrors(t *testing.T) {
	srv, _ := tokenEndpoint(t, "flakestream", "client-s3cret", "", time.Minute, http.StatusUnauthorized)
	_, err := newOAuthSource(srv.URL+"/token", "flakestream", "client-s3cret", "").Token(context.Background())
	if err == nil || strings.Contains(err.Error(), "\n") || strings.Contains(err.Error(), "client-s3cret") ||
		!strings.Contains(err.Error(), "401") || !strings.Contains(err.Error(), "invalid_client") || !strings.Contains(err.Error(), `client "flakestream"`) {
		t.Errorf("refused client: %v; want one line with the status and the provider's error, no secret", err)
	}
	// A refusal is an authentication failure, which ends a run (mid-run
	// too); a provider that fails is not, and its sign-in is retried.
	if !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Errorf("refused client: %v is no SASL_AUTHENTICATION_FAILED", err)
	}
	down, _ := tokenEndpoint(t, "flakestream", "client-s3cret", "", time.Minute, http.StatusServiceUnavailable)
	if _, err := newOAuthSource(down.URL+"/token", "flakestream", "client-s3cret", "").Token(context.Background()); err == nil || errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Errorf("provider answering 503: %v; want an error that is no authentication failure", err)
	}
	base := []string{"run", "--server-id", "1", "--worker-id", "1", "--sequencer", "memory", "--log-level", "error", "--input-topic", "in", "--output-topic", "out",
		"--http-addr", "", "--sasl-mechanism", "OAUTHBEARER"}
	// At start the first token is fetched before any broker is asked: a
	// refused client ends the command at once, exit 1, with the hint.
	_, errOut, code := runApp(t, "", nil, append(base, "--brokers", "127.0.0.1:1", "--sasl-oauth-token-url", srv.URL+"/token",
		"--sasl-oauth-client-id", "flakestream", "--sasl-oauth-client-secret", "client-s3cret")...)
	if code != 1 || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, "invalid_client") ||
		!strings.Contains(errOut, "check --sasl-oauth-client-id") || strings.Contains(errOut, "client-s3cret") {
		t.Errorf("refused client at start: exit %d, %q; want exit 1 and one line with the provider's error and the flags to check", code, errOut)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "--sasl-mechanism oauthbearer needs --sasl-oauth-token-url, --sasl-oauth-client-id and --sasl-oauth-client-secret"},
		{[]string{"--sasl-oauth-token-url", "idp.example/token", "--sasl-oauth-client-id", "a", "--sasl-oauth-client-secret", "b"}, `--sasl-oauth-token-url "idp.example/token": want the token endpoint's https:// URL`},
	} {
		_, errOut, code := runApp(t, "", nil, append(base, c.args...)...)
		if code != 2 || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, %q; want exit 2 and one line with %q", c.args, code, errOut, c.want)
		}
	}
}

// AWS_MSK_IAM signs in with the AWS SDK's credentials (here the standard
// variables, with a session token), for the region of the broker's MSK
// host name or, for another host, AWS_REGION. The signature is checked
// by computing AWS Signature Version 4 for a presigned GET here, apart
// from franz-go's code; the secret key itself is never sent.
func TestAWSMSKIAMSigning(t *testing.T) {
	const access, secret, session = "AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", "session-token/with+chars"
	for k, v := range map[string]string{
		"AWS_ACCESS_KEY_ID": access, "AWS_SECRET_ACCESS_KEY": secret, "AWS_SESSION_TOKEN": session, "AWS_REGION": "eu-west-1",
		"AWS_EC2_METADATA_DISABLED": "true", "AWS_CONFIG_FILE": "/nonexistent", "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent", "AWS_PROFILE": "",
	} {
		t.Setenv(k, v)
	}
	ctx := context.Background()
	mech, err := awsMechanism(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if mech.Name() != "AWS_MSK_IAM" {
		t.Fatalf("mechanism %s", mech.Name())
	}
	for host, region := range map[string]string{
		"b-1.orders.abc123.c2.kafka.us-east-1.amazonaws.com": "us-east-1",
		"kafka.internal.example":                             "eu-west-1",
	} {
		_, msg, err := mech.Authenticate(ctx, host+":9098")
		if err != nil {
			t.Fatalf("%s: %v", host, err)
		}
		if strings.Contains(string(msg), secret) {
			t.Errorf("%s: the secret key is in the message", host)
		}
		var m map[string]string
		if err := json.Unmarshal(msg, &m); err != nil {
			t.Fatalf("%s: %v: %s", host, err, msg)
		}
		ts := m["x-amz-date"]
		scope := ts[:8] + "/" + region + "/kafka-cluster/aws4_request"
		for k, want := range map[string]string{"version": "2020_10_22", "host": host, "action": "kafka-cluster:Connect",
			"x-amz-algorithm": "AWS4-HMAC-SHA256", "x-amz-credential": access + "/" + scope, "x-amz-security-token": session,
			"x-amz-signedheaders": "host", "x-amz-expires": "900"} {
			if m[k] != want {
				t.Errorf("%s: %s = %q, want %q", host, k, m[k], want)
			}
		}
		if ts0, err := time.Parse("20060102T150405Z", ts); err != nil || time.Since(ts0).Abs() > time.Hour {
			t.Errorf("%s: x-amz-date %q is not a time near now", host, ts)
		}
		q := url.Values{}
		for _, k := range []string{"Action", "X-Amz-Algorithm", "X-Amz-Credential", "X-Amz-Date", "X-Amz-Expires", "X-Amz-SignedHeaders", "X-Amz-Security-Token"} {
			q.Set(k, m[strings.ToLower(k)])
		}
		canonical := strings.Join([]string{"GET", "/", strings.ReplaceAll(q.Encode(), "+", "%20"), "host:" + host + "\n", "host", hexSHA256("")}, "\n")
		toSign := strings.Join([]string{"AWS4-HMAC-SHA256", ts, scope, hexSHA256(canonical)}, "\n")
		key := []byte("AWS4" + secret)
		for _, part := range []string{ts[:8], region, "kafka-cluster", "aws4_request"} {
			key = hmacSHA256(key, part)
		}
		if want := hex.EncodeToString(hmacSHA256(key, toSign)); m["x-amz-signature"] != want {
			t.Errorf("%s: signature %s, want %s", host, m["x-amz-signature"], want)
		}
	}
}

func hexSHA256(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

func hmacSHA256(key []byte, data string) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(data))
	return h.Sum(nil)
}

// The principal a token names is its sub claim, read from the JWT's
// payload; a token that is no JWT names none.
func TestJWTSubject(t *testing.T) {
	payload := base64.RawURLEncoding.EncodeToString([]byte(`{"sub":"orders-worker","aud":"kafka"}`))
	for tok, want := range map[string]string{
		"eyJhbGciOiJSUzI1NiJ9." + payload + ".c2ln": "orders-worker",
		"opaque-token": "",
		"a.!!!.c":      "",
		"a." + base64.RawURLEncoding.EncodeToString([]byte("[1]")) + ".c": "",
	} {
		if got := jwtSubject(tok); got != want {
			t.Errorf("jwtSubject(%q) = %q, want %q", tok, got, want)
		}
	}
}
