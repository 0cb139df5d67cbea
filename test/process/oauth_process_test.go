package process_test

import (
	"strings"
	"testing"
	"time"

	"github.com/flakestream/flakestream/internal/orders"
	"github.com/flakestream/flakestream/test/accounting"
	"github.com/flakestream/flakestream/test/harness"
	"github.com/flakestream/flakestream/test/testenv"
)

// oauthTokenLifetime is how long the test provider's tokens live: short,
// so that the worker has to fetch a new one and sign in again with it
// during the run.
const oauthTokenLifetime = 30 * time.Second

// On Apache Kafka whose SASL_SSL listener takes OAUTHBEARER, validated
// against a JWKS the test serves on 127.0.0.1 (scripts/kafka-local
// --oauth-jwks), `flakestream run` signs in with RS256 JWTs from the
// test's token endpoint (client credentials, tokens living 30 s), its
// principal the token's subject, holding exactly the run rows of
// docs/security.md's ACL table. It goes on past its first token's life
// (it fetches another and signs in again before the broker ends its
// session): every order is numbered exactly once. A client the provider
// refuses, a token signed by a key not in the JWKS, and a token for
// another audience each end the worker with exit 1 and one line, within a
// bound, never an endless retry.
func TestWorkerOAuthBearer(t *testing.T) {
	oidc := testenv.NewOIDC(t, "flakestream-test-cluster", oauthTokenLifetime)
	k := testenv.RealKafka(t, testenv.KafkaOAuth(oidc))
	redis := testenv.RedisServer(t)
	s := k.Secure()
	if s.OAuthJWKSURL != oidc.JWKSURL() || s.OAuthIssuer != oidc.Issuer || s.OAuthAudience != oidc.Audience {
		t.Fatalf("kafka-local printed OAuth %q %q %q, want %q %q %q", s.OAuthJWKSURL, s.OAuthIssuer, s.OAuthAudience,
			oidc.JWKSURL(), oidc.Issuer, oidc.Audience)
	}

	t.Run("exactly-once", func(t *testing.T) {
		e := harness.NewEnv(t, k, redis, 2)
		client := testenv.OIDCClient{ID: "worker-" + e.Input, Secret: "s3cret-" + e.Input, Subject: "flakestream-" + e.Input}
		oidc.AddClient(client)
		k.GrantCommand(t, client.Subject, "run",
			map[string]string{"input": e.Input, "output": e.Output, "dlq": e.DLQ, "group": e.Group})
		e.Produce(t, 2000, orders.Mix{BadPerMille: 20})
		w := e.StartWorker(t, "a", s.OAuthCLIArgs(oidc.TokenURL(), client.ID, client.Secret)...)
		if _, ok := e.WaitCommitted(t, 2*time.Minute); !ok {
			t.Fatalf("the worker committed nothing with a token:\n%s", harness.Tail(w.Stderr.String(), 3000))
		}
		// A token fetched after the first has lived half its life is a
		// refresh: the worker's source keeps a token for 80% of it.
		refreshed := accounting.WaitFor(3*time.Minute, func() bool {
			at := oidc.Issued(client.ID)
			return len(at) > 0 && at[len(at)-1].Sub(at[0]) >= oauthTokenLifetime/2
		})
		if !refreshed {
			t.Fatalf("no token fetched after the first had lived %s (fetched at %v):\n%s",
				oauthTokenLifetime/2, oidc.Issued(client.ID), harness.Tail(w.Stderr.String(), 3000))
		}
		if w.Exited() {
			t.Fatalf("the worker exited: %v\n%s", w.Err, harness.Tail(w.Stderr.String(), 3000))
		}
		// Numbered under the new token (and sessions signed in again).
		e.Produce(t, 2000, orders.Mix{BadPerMille: 20})
		rep := e.Check(t, 2*time.Minute)
		if !rep.OK() {
			t.Fatalf("%s\n%s", rep, harness.Tail(w.Stderr.String(), 3000))
		}
		t.Logf("%d tokens fetched: %s", len(oidc.Issued(client.ID)), rep)
		if err := w.Stop(30 * time.Second); err != nil {
			t.Error(err)
		}
	})

	// The provider stops taking the worker's secret mid-run (rotated, or
	// the client deleted): when its token is due for a refresh the worker
	// ends, exit 1 and one line, within a bound; what it committed is
	// exact.
	t.Run("secret-revoked", func(t *testing.T) {
		e := harness.NewEnv(t, k, redis, 1)
		client := testenv.OIDCClient{ID: "worker-" + e.Input, Secret: "s3cret-old-q7", Subject: "flakestream-" + e.Input}
		oidc.AddClient(client)
		k.GrantCommand(t, client.Subject, "run",
			map[string]string{"input": e.Input, "output": e.Output, "dlq": e.DLQ, "group": e.Group})
		e.Produce(t, 500, orders.Mix{})
		w := e.StartWorker(t, "a", s.OAuthCLIArgs(oidc.TokenURL(), client.ID, client.Secret)...)
		if _, ok := e.WaitCommitted(t, 2*time.Minute); !ok {
			t.Fatalf("the worker committed nothing with a token:\n%s", harness.Tail(w.Stderr.String(), 3000))
		}
		client.Secret = "s3cret-new-q7"
		oidc.AddClient(client)
		revoked := time.Now()
		select {
		case <-w.Done:
		case <-time.After(oauthTokenLifetime + 2*time.Minute):
			t.Fatalf("the worker still runs %s after its secret was revoked:\n%s", time.Since(revoked).Round(time.Second), harness.Tail(w.Stderr.String(), 3000))
		}
		line := lastLine(w.Stderr.String())
		t.Logf("exit %v %s after the revocation: %s", w.Err, time.Since(revoked).Round(100*time.Millisecond), line)
		if code := w.Cmd.ProcessState.ExitCode(); code != 1 {
			t.Errorf("exit code %d, want 1", code)
		}
		for _, want := range []string{"flakestream: ", "invalid_client"} {
			if !strings.Contains(line, want) {
				t.Errorf("the last line lacks %q: %s", want, line)
			}
		}
		if rep := e.Check(t, time.Minute); !rep.OK() {
			t.Errorf("%s", rep)
		}
	})

	for _, c := range []struct {
		name   string
		client testenv.OIDCClient
		secret string // what the worker is given
		want   []string
	}{
		{name: "wrong-secret", client: testenv.OIDCClient{Secret: "s3cret-right-q7"}, secret: "s3cret-wrong-q7", want: []string{"401", "invalid_client"}},
		{name: "foreign-key", client: testenv.OIDCClient{Secret: "s3cret-right-q7", ForeignKey: true}, secret: "s3cret-right-q7", want: []string{"SASL_AUTHENTICATION_FAILED"}},
		{name: "wrong-audience", client: testenv.OIDCClient{Secret: "s3cret-right-q7", Audience: "another-cluster"}, secret: "s3cret-right-q7", want: []string{"SASL_AUTHENTICATION_FAILED"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := harness.NewEnv(t, k, redis, 1)
			client := c.client
			client.ID, client.Subject = "worker-"+e.Input, "flakestream-"+e.Input
			oidc.AddClient(client)
			k.GrantCommand(t, client.Subject, "run",
				map[string]string{"input": e.Input, "output": e.Output, "dlq": e.DLQ, "group": e.Group})
			e.Produce(t, 10, orders.Mix{})
			w := e.StartWorker(t, "a", s.OAuthCLIArgs(oidc.TokenURL(), client.ID, c.secret)...)
			select {
			case <-w.Done:
			case <-time.After(2 * time.Minute):
				t.Fatalf("the worker still runs 2 minutes after its start:\n%s", harness.Tail(w.Stderr.String(), 3000))
			}
			line := lastLine(w.Stderr.String())
			t.Logf("exit %v after %s: %s", w.Err, time.Since(w.Started).Round(100*time.Millisecond), line)
			if code := w.Cmd.ProcessState.ExitCode(); code != 1 {
				t.Errorf("exit code %d, want 1", code)
			}
			want := append([]string{"flakestream: "}, c.want...)
			if c.secret == client.Secret { // the token names its subject
				want = append(want, "User:"+client.Subject)
			}
			for _, want := range want {
				if !strings.Contains(line, want) {
					t.Errorf("the last line lacks %q: %s", want, line)
				}
			}
			if strings.Contains(w.Stderr.String(), c.secret) {
				t.Errorf("the client secret is in the worker's log")
			}
		})
	}
}
