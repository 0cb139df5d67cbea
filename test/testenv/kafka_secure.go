package testenv

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// Client certificate modes of a secured broker (KafkaSecured): the
// broker's ssl.client.auth.
const (
	ClientAuthRequested = "requested" // a client may present a certificate
	ClientAuthRequired  = "required"  // a client must present one the CA signed
	ClientAuthNone      = "none"      // no client certificate is asked for
)

// KafkaSecure is what a client of a secured broker needs: the broker's
// SASL_SSL listener takes SCRAM-SHA-512 and PLAIN, its certificate is
// signed by CA, and StandardAuthorizer allows nothing without an ACL except
// to the super user Admin. Read from scripts/kafka-local --secure's output.
type KafkaSecure struct {
	CA         string // PEM file of the CA that signed the brokers' and the client's certificates
	ClientCert string // PEM file of a client certificate the CA signed
	ClientKey  string // its key (PKCS#8, unencrypted)
	ClientAuth string // ClientAuthRequested, ClientAuthRequired or ClientAuthNone

	AdminUser, AdminPassword string
	// AdminProperties is a properties file for Kafka's Java tools
	// (--command-config): SCRAM as the admin, with the CA and the client
	// certificate.
	AdminProperties string
	// Users are the users (name to password) the script made besides the
	// admin: SCRAM-SHA-512 and PLAIN, without ACLs.
	Users map[string]string
	// With KafkaOAuth: the listener also takes OAUTHBEARER, tokens checked
	// against the JWKS at OAuthJWKSURL, with iss OAuthIssuer and aud
	// OAuthAudience. "" without.
	OAuthJWKSURL, OAuthIssuer, OAuthAudience string
}

// KafkaSecured asks RealKafka or RealKafkaCluster for a secured broker
// (scripts/kafka-local start --secure, see KafkaSecure) asking for client
// certificates as clientAuth says ("" is ClientAuthRequested). The
// cluster's Client and Admin sign in as the super user; ClientAs signs in
// as another principal. A secured broker is never shared with another
// test, and KAFKA_BROKERS is not used for one.
func KafkaSecured(clientAuth string) KafkaOpt {
	if clientAuth == "" {
		clientAuth = ClientAuthRequested
	}
	return func(c *kafkaConfig) { c.secure = clientAuth }
}

// KafkaOAuth asks for a secured broker (KafkaSecured, with client
// certificates requested unless that option says otherwise) whose client
// listener also takes SASL OAUTHBEARER with the tokens of provider o:
// scripts/kafka-local --oauth-jwks with o's JWKS, issuer and audience. The
// principal of a token is User:<its sub claim>.
func KafkaOAuth(o *OIDC) KafkaOpt {
	return func(c *kafkaConfig) {
		if c.secure == "" {
			c.secure = ClientAuthRequested
		}
		c.oauth = []string{"--oauth-jwks", o.JWKSURL(), "--oauth-issuer", o.Issuer, "--oauth-audience", o.Audience}
	}
}

// secureArgs are the script's arguments for a secured broker.
func (c kafkaConfig) secureArgs() []string {
	if c.secure == "" {
		return nil
	}
	return append([]string{"--secure", "--client-auth", c.secure}, c.oauth...)
}

// parseKafkaSecure reads the assignments scripts/kafka-local --secure prints
// (KEY=value lines, values maybe single-quoted).
func parseKafkaSecure(out string) (*KafkaSecure, []string, error) {
	env := map[string]string{}
	for _, l := range strings.Split(out, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(l), "="); ok {
			env[k] = strings.Trim(v, `'"`)
		}
	}
	s := &KafkaSecure{CA: env["KAFKA_TLS_CA"], ClientCert: env["KAFKA_TLS_CLIENT_CERT"], ClientKey: env["KAFKA_TLS_CLIENT_KEY"],
		ClientAuth: env["KAFKA_TLS_CLIENT_AUTH"], AdminUser: env["KAFKA_ADMIN_USER"], AdminPassword: env["KAFKA_ADMIN_PASSWORD"],
		AdminProperties: env["KAFKA_ADMIN_PROPERTIES"], Users: map[string]string{},
		OAuthJWKSURL: env["KAFKA_OAUTH_JWKS_URL"], OAuthIssuer: env["KAFKA_OAUTH_ISSUER"], OAuthAudience: env["KAFKA_OAUTH_AUDIENCE"]}
	for _, u := range strings.Fields(env["KAFKA_USERS"]) {
		if name, pw, ok := strings.Cut(u, ":"); ok {
			s.Users[name] = pw
		}
	}
	if env["KAFKA_BROKERS"] == "" || s.CA == "" || s.AdminUser == "" || s.AdminPassword == "" {
		return nil, nil, fmt.Errorf("kafka-local --secure printed no brokers, CA or admin: %q", out)
	}
	return s, strings.Split(env["KAFKA_BROKERS"], ","), nil
}

// readKafkaSecure reads the client.env a secured `run` writes in its data
// dir.
func readKafkaSecure(dir string) (*KafkaSecure, error) {
	b, err := os.ReadFile(filepath.Join(dir, "client.env"))
	if err != nil {
		return nil, err
	}
	s, _, err := parseKafkaSecure(string(b))
	return s, err
}

// TLSConfig is the TLS configuration of a client of the secured broker:
// the CA, and the client certificate when cert is set (required when the
// broker's ClientAuth is ClientAuthRequired).
func (s *KafkaSecure) TLSConfig(cert bool) (*tls.Config, error) {
	pem, err := os.ReadFile(s.CA)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("no certificate in %s", s.CA)
	}
	cfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if cert {
		pair, err := tls.LoadX509KeyPair(s.ClientCert, s.ClientKey)
		if err != nil {
			return nil, err
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}

// Opts are the franz-go options that sign in as user with password over
// SCRAM-SHA-512 (PLAIN if plainMech), with the CA and the client
// certificate.
func (s *KafkaSecure) Opts(user, password string, plainMech bool) ([]kgo.Opt, error) {
	cfg, err := s.TLSConfig(true)
	if err != nil {
		return nil, err
	}
	mech := scram.Auth{User: user, Pass: password}.AsSha512Mechanism()
	if plainMech {
		mech = plain.Auth{User: user, Pass: password}.AsMechanism()
	}
	return []kgo.Opt{kgo.DialTLSConfig(cfg), kgo.SASL(mech)}, nil
}

// Secure returns what a client of the secured broker needs, or nil for a
// broker without security.
func (c *KafkaCluster) Secure() *KafkaSecure { return c.secure }

// adminOpts are the options that sign in as the super user (none for a
// broker without security).
func (c *KafkaCluster) adminOpts(t testing.TB) []kgo.Opt {
	t.Helper()
	if c.secure == nil {
		return nil
	}
	opts, err := c.secure.Opts(c.secure.AdminUser, c.secure.AdminPassword, false)
	if err != nil {
		t.Fatalf("testenv: secured kafka: %v", err)
	}
	return opts
}

// ClientAs returns a client of the secured broker that signs in as user
// with password (SCRAM-SHA-512, with the client certificate), closed at the
// end of t.
func (c *KafkaCluster) ClientAs(t testing.TB, user, password string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	if c.secure == nil {
		t.Fatal("testenv: ClientAs needs a secured broker (KafkaSecured)")
	}
	sec, err := c.secure.Opts(user, password, false)
	if err != nil {
		t.Fatalf("testenv: secured kafka: %v", err)
	}
	cl, err := kgo.NewClient(append(append([]kgo.Opt{kgo.SeedBrokers(c.Addrs...)}, sec...), opts...)...)
	if err != nil {
		t.Fatalf("testenv: kafka client: %v", err)
	}
	t.Cleanup(cl.Close)
	return cl
}

var secureUserSeq struct {
	sync.Mutex
	n int
}

// CreateUser gives a new principal User:NAME (name unique to t, from
// prefix) a SCRAM-SHA-512 credential on the secured broker, as the admin,
// and returns its name and password. It has no ACL yet. The credential
// reaches every broker a moment later: CreateUser waits until it signs in.
func (c *KafkaCluster) CreateUser(t testing.TB, prefix string) (name, password string) {
	t.Helper()
	if c.secure == nil {
		t.Fatal("testenv: CreateUser needs a secured broker (KafkaSecured)")
	}
	secureUserSeq.Lock()
	secureUserSeq.n++
	name = fmt.Sprintf("%s-%d-%s", prefix, secureUserSeq.n, kafkaRandomHex(3))
	secureUserSeq.Unlock()
	password = kafkaRandomHex(12)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := c.Admin(t).AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{
		User: name, Mechanism: kadm.ScramSha512, Iterations: 4096, Password: password}})
	if err == nil {
		err = res.Error()
	}
	if err != nil {
		t.Fatalf("testenv: create user %s: %v", name, err)
	}
	cl := c.ClientAs(t, name, password)
	for {
		// Any request signs in first; an unknown user fails SASL.
		if _, err = kadm.NewClient(cl).BrokerMetadata(ctx); err == nil {
			return name, password
		}
		if ctx.Err() != nil {
			t.Fatalf("testenv: user %s cannot sign in after a minute: %v", name, err)
		}
		cl.ForceMetadataRefresh()
		time.Sleep(200 * time.Millisecond)
	}
}

// AddACLs creates the ACLs b describes, as the admin, failing t on any
// error.
func (c *KafkaCluster) AddACLs(t testing.TB, b *kadm.ACLBuilder) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := c.Admin(t).CreateACLs(ctx, b)
	if err == nil {
		for _, r := range res {
			if r.Err != nil {
				err = fmt.Errorf("%s %s %s %s: %w", r.Principal, r.Operation, r.Type, r.Name, r.Err)
				break
			}
		}
	}
	if err != nil {
		t.Fatalf("testenv: create ACLs: %v", err)
	}
}

// DeleteACLs deletes the ACLs b matches, as the admin, and returns how
// many it deleted.
func (c *KafkaCluster) DeleteACLs(t testing.TB, b *kadm.ACLBuilder) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := c.Admin(t).DeleteACLs(ctx, b)
	n := 0
	for _, r := range res {
		if err == nil && r.Err != nil {
			err = r.Err
		}
		for _, m := range r.Deleted {
			if m.Err != nil && err == nil {
				err = m.Err
			}
			n++
		}
	}
	if err != nil {
		t.Fatalf("testenv: delete ACLs: %v", err)
	}
	return n
}

// CLIArgs are flakestream's flags that sign in to the secured broker as
// user with password (SCRAM-SHA-512, the CA, the client certificate).
func (s *KafkaSecure) CLIArgs(user, password string) []string {
	return []string{"--kafka-tls-ca", s.CA, "--kafka-tls-cert", s.ClientCert, "--kafka-tls-key", s.ClientKey,
		"--sasl-mechanism", "scram-sha-512", "--sasl-user", user, "--sasl-password", password}
}

// OAuthCLIArgs are flakestream's flags that sign in to the secured broker
// with SASL OAUTHBEARER, with tokens from the OIDC token endpoint tokenURL
// for client id and secret (and the CA and the client certificate).
func (s *KafkaSecure) OAuthCLIArgs(tokenURL, id, secret string) []string {
	return []string{"--kafka-tls-ca", s.CA, "--kafka-tls-cert", s.ClientCert, "--kafka-tls-key", s.ClientKey,
		"--sasl-mechanism", "oauthbearer", "--sasl-oauth-token-url", tokenURL,
		"--sasl-oauth-client-id", id, "--sasl-oauth-client-secret", secret}
}

// ClientOpts are the options of a client of the cluster: its addresses,
// and on a secured broker the super user's sign-in.
func (c *KafkaCluster) ClientOpts(t testing.TB) []kgo.Opt {
	t.Helper()
	return append([]kgo.Opt{kgo.SeedBrokers(c.Addrs...)}, c.adminOpts(t)...)
}
