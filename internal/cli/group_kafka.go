package cli

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"time"

	"github.com/flakestream/flakestream/eos"
	"github.com/flakestream/flakestream/internal/kprobe"
	"github.com/flakestream/flakestream/internal/tlskey"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kversion"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	"github.com/urfave/cli/v2"
)

// The kafka group: the brokers and how to reach them (TLS, SASL, protocol).
const (
	flagBrokers         = "brokers"
	flagKafkaTLS        = "kafka-tls"
	flagKafkaTLSCA      = "kafka-tls-ca"
	flagKafkaTLSCert    = "kafka-tls-cert"
	flagKafkaTLSKey     = "kafka-tls-key"
	flagKafkaTLSKeyPass = "kafka-tls-key-password"
	flagKafkaTLSServer  = "kafka-tls-server-name"
	flagSASLMechanism   = "sasl-mechanism"
	flagSASLUser        = "sasl-user"
	flagSASLPassword    = "sasl-password"
	flagKafkaMaxVersion = "kafka-max-version"

	flagSASLOAuthTokenURL     = "sasl-oauth-token-url"
	flagSASLOAuthClientID     = "sasl-oauth-client-id"
	flagSASLOAuthClientSecret = "sasl-oauth-client-secret"
	flagSASLOAuthScope        = "sasl-oauth-scope"
	flagConnectTimeout        = "connect-timeout"
)

// defaultConnectTimeout bounds how long a command waits, at start, for a
// --brokers address to answer as Kafka.
const defaultConnectTimeout = time.Minute

type kafkaConfig struct {
	brokers                   cli.StringSlice
	tls                       bool
	tlsFiles                  tlsFiles
	saslMechanism, user, pass string
	oauthTokenURL, oauthID    string
	oauthSecret, oauthScope   string
	oauth                     *oauthSource // oauthbearer: made by opts
	maxVersion                string
	connectTimeout            time.Duration
}

func (k *kafkaConfig) flags() []cli.Flag {
	return concat([]cli.Flag{
		brokersFlag(&k.brokers, []string{eos.DefaultBroker}, "Kafka seed brokers, host:port (repeat, or comma-separate)"),
		boolFlag(flagKafkaTLS, &k.tls, "connect to Kafka with TLS"),
	}, k.tlsFiles.flags(flagKafkaTLSCA, flagKafkaTLSCert, flagKafkaTLSKey,
		"PEM `FILE` of CAs to trust for Kafka TLS (default: the system pool)",
		"PEM `FILE` of a client certificate for Kafka mTLS",
		"PEM `FILE` of the client certificate's key"), []cli.Flag{
		k.tlsFiles.keyPasswordFlag(flagKafkaTLSKeyPass, "password of --"+flagKafkaTLSKey+" when it is encrypted (PKCS#8 with PBES2 and AES, as openssl pkcs8 -topk8 -v2 aes256 writes it) (prefer FLAKESTREAM_KAFKA_TLS_KEY_PASSWORD to a flag)"),
		k.tlsFiles.serverNameFlag(flagKafkaTLSServer, "name every broker's certificate must carry, when it is not the host dialled (default: each broker's host, from --brokers and the metadata)"),
		stringFlag(flagSASLMechanism, &k.saslMechanism, "", "Kafka SASL mechanism: plain, scram-sha-256, scram-sha-512, oauthbearer (OIDC client credentials, --sasl-oauth-*) or aws_msk_iam (the AWS SDK's default credentials) (default: none)"),
		stringFlag(flagSASLUser, &k.user, "", "SASL user name"),
		stringFlag(flagSASLPassword, &k.pass, "", "SASL password (prefer FLAKESTREAM_SASL_PASSWORD to a flag)"),
		stringFlag(flagSASLOAuthTokenURL, &k.oauthTokenURL, "", "for oauthbearer: the OIDC provider's token endpoint `URL`, asked for tokens by the client credentials grant"),
		stringFlag(flagSASLOAuthClientID, &k.oauthID, "", "for oauthbearer: the client ID"),
		stringFlag(flagSASLOAuthClientSecret, &k.oauthSecret, "", "for oauthbearer: the client secret (prefer FLAKESTREAM_SASL_OAUTH_CLIENT_SECRET to a flag)"),
		stringFlag(flagSASLOAuthScope, &k.oauthScope, "", "for oauthbearer: the scopes to ask for, space- or comma-separated (default: none)"),
		stringFlag(flagKafkaMaxVersion, &k.maxVersion, "", "speak the Kafka protocol of at most this release (e.g. 3.9), for brokers or features a newer protocol trips on (default: the newest both sides know)"),
		durationFlag(flagConnectTimeout, &k.connectTimeout, defaultConnectTimeout, "at start, wait at most this long for a --brokers address to answer as Kafka, then exit saying what is there (something that answers but is not Kafka, or TLS without --kafka-tls, ends it at once; 0: no check)"),
	})
}

// brokersFlag is --brokers; bench gives it no default (an embedded kfake).
func brokersFlag(dst *cli.StringSlice, value []string, usage string) cli.Flag {
	return stringSliceFlag(flagBrokers, dst, value, usage)
}

// tlsFiles are the settings of a TLS client, as the Kafka, Redis and
// schema-registry flags give them: the PEM files of the CAs to trust (""
// for the system pool), of a client certificate and its key (cert "" for
// none), the name the server's certificate must carry ("" for the host
// dialled), and the names of their flags, which an error names so that
// users know which flag to fix.
type tlsFiles struct {
	ca, cert, key, serverName string
	keyPassword               string // of an encrypted key; "" for none
	flagCA, flagCert, flagKey string
	flagKeyPassword           string
}

// flags returns the three flags, named and described as given.
func (t *tlsFiles) flags(ca, cert, key, caUsage, certUsage, keyUsage string) []cli.Flag {
	t.flagCA, t.flagCert, t.flagKey = ca, cert, key
	return []cli.Flag{
		stringFlag(ca, &t.ca, "", caUsage),
		stringFlag(cert, &t.cert, "", certUsage),
		stringFlag(key, &t.key, "", keyUsage),
	}
}

// keyPasswordFlag returns the flag of the key's password, named as given.
func (t *tlsFiles) keyPasswordFlag(name, usage string) cli.Flag {
	t.flagKeyPassword = name
	return stringFlag(name, &t.keyPassword, "", usage)
}

// serverNameFlag returns the flag of the server name, named as given.
func (t *tlsFiles) serverNameFlag(name, usage string) cli.Flag {
	return stringFlag(name, &t.serverName, "", usage)
}

// given reports whether a CA, a client certificate or a server name was
// given.
func (t *tlsFiles) given() bool { return t.ca != "" || t.cert != "" || t.serverName != "" }

// config is the TLS client configuration of the settings.
func (t *tlsFiles) config() (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.serverName}
	if t.ca != "" {
		pem, err := os.ReadFile(t.ca)
		if err != nil {
			return nil, fmt.Errorf("--%s: %w", t.flagCA, err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--%s %s: no PEM certificate in it", t.flagCA, t.ca)
		}
	}
	if t.cert != "" {
		pair, err := tlskey.LoadX509KeyPair(t.cert, t.key, []byte(t.keyPassword))
		if err != nil {
			if t.flagKeyPassword != "" && (errors.Is(err, tlskey.ErrNoPassword) || errors.Is(err, tlskey.ErrPassword)) {
				return nil, fmt.Errorf("--%s/--%s: %w (check --%s)", t.flagCert, t.flagKey, err, t.flagKeyPassword)
			}
			return nil, fmt.Errorf("--%s/--%s: %w", t.flagCert, t.flagKey, err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}

// principal is who the brokers see these settings sign in as, spelled as
// kafka-acls takes it: User:<--sasl-user> for PLAIN and SCRAM; with
// oauthbearer, User:<the sub claim of the token opts fetched> ("" before);
// without SASL, the client certificate's subject as Kafka's default
// principal builder names it (the distinguished name in RFC 2253 form, the
// last RDN first, as Java's X500Principal.getName prints it; a broker with
// ssl.principal.mapping.rules maps it further); User:ANONYMOUS on a
// connection with neither. "" where the flags do not say it (AWS_MSK_IAM:
// the IAM identity; a certificate that does not load): the line then says
// "your principal".
func (k *kafkaConfig) principal() string {
	switch strings.ToLower(k.saslMechanism) {
	case "":
	case mechOAuthBearer:
		if k.oauth != nil && k.oauth.Subject() != "" {
			return "User:" + k.oauth.Subject()
		}
		return ""
	case "plain", "scram-sha-256", "scram-sha-512":
		return "User:" + k.user
	default:
		return ""
	}
	if k.tlsFiles.cert != "" {
		return certPrincipal(k.tlsFiles.cert, k.tlsFiles.key, []byte(k.tlsFiles.keyPassword))
	}
	return "User:ANONYMOUS"
}

// certPrincipal is Kafka's default principal for the client certificate
// in certFile: User: and its subject in RFC 2253 form, read from the
// certificate's own encoding so the RDNs keep their order; "" if it does
// not load.
func certPrincipal(certFile, keyFile string, keyPassword []byte) string {
	pair, err := tlskey.LoadX509KeyPair(certFile, keyFile, keyPassword)
	if err != nil || len(pair.Certificate) == 0 {
		return ""
	}
	c, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return ""
	}
	var rdn pkix.RDNSequence
	if rest, err := asn1.Unmarshal(c.RawSubject, &rdn); err != nil || len(rest) > 0 {
		return "User:" + c.Subject.String()
	}
	return "User:" + rdn.String()
}

// opts turns the Kafka security flags into franz-go options.
func (k *kafkaConfig) opts() ([]kgo.Opt, error) {
	var opts []kgo.Opt
	if k.tls || k.tlsFiles.given() {
		cfg, err := k.tlsFiles.config()
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.DialTLSConfig(cfg))
	}
	if v := k.maxVersion; v != "" {
		versions := kversion.FromString(v)
		if versions == nil {
			return nil, usageErr("--%s %q: want a release such as 3.9 or 4.0", flagKafkaMaxVersion, v)
		}
		opts = append(opts, kgo.MaxVersions(versions))
	}
	switch m := strings.ToLower(k.saslMechanism); m {
	case "":
	case "plain":
		opts = append(opts, kgo.SASL(plain.Auth{User: k.user, Pass: k.pass}.AsMechanism()))
	case "scram-sha-256":
		opts = append(opts, kgo.SASL(scram.Auth{User: k.user, Pass: k.pass}.AsSha256Mechanism()))
	case "scram-sha-512":
		opts = append(opts, kgo.SASL(scram.Auth{User: k.user, Pass: k.pass}.AsSha512Mechanism()))
	case mechOAuthBearer:
		if k.oauthTokenURL == "" || k.oauthID == "" || k.oauthSecret == "" {
			return nil, usageErr("--%s %s needs --%s, --%s and --%s", flagSASLMechanism, m, flagSASLOAuthTokenURL, flagSASLOAuthClientID, flagSASLOAuthClientSecret)
		}
		if err := checkTokenURL(k.oauthTokenURL); err != nil {
			return nil, err
		}
		// The first token now: a provider that refuses the client is one
		// line at start, not a sign-in retried until the connect timeout,
		// and the token's subject names the principal in messages.
		k.oauth = newOAuthSource(k.oauthTokenURL, k.oauthID, k.oauthSecret, k.oauthScope)
		if _, err := k.oauth.Token(context.Background()); err != nil {
			return nil, err
		}
		opts = append(opts, kgo.SASL(oauthMechanism(k.oauth)))
	case mechAWSMSKIAM:
		mech, err := awsMechanism(context.Background())
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.SASL(mech))
	default:
		return nil, usageErr("--%s %q: want plain, scram-sha-256, scram-sha-512, oauthbearer or aws_msk_iam", flagSASLMechanism, m)
	}
	return opts, nil
}

// probeTimeout bounds one probe of one address.
const probeTimeout = 10 * time.Second

// reach waits, at most --connect-timeout, until one of --brokers answers
// as Kafka. An address that answers as something else (Redis, HTTP, TLS
// when --kafka-tls is off, or plaintext when it is on) is a mistake that
// waiting does not mend: when every address is one, reach fails at once.
// One that does not answer may be starting: reach tries again, logging
// what it found, and fails with it when the time is up. Its error is one
// line that says what is at each address. A signal ends it without error:
// the command's own shutdown answers that.
func (k *kafkaConfig) reach(ctx context.Context, log *slog.Logger) error {
	if k.connectTimeout <= 0 {
		return nil
	}
	var tlsCfg *tls.Config
	if k.tls || k.tlsFiles.given() {
		var err error
		if tlsCfg, err = k.tlsFiles.config(); err != nil {
			return err
		}
	}
	deadline := time.Now().Add(k.connectTimeout)
	for wait := 500 * time.Millisecond; ; wait = min(2*wait, 5*time.Second) {
		var found []string
		definite := true
		for _, b := range k.brokers.Value() {
			f := kprobe.Probe(ctx, withPort(b), tlsCfg, min(probeTimeout, max(time.Until(deadline), time.Second)))
			if f.Kind == kprobe.Kafka {
				return nil
			}
			definite = definite && f.Kind != kprobe.Unreachable
			found = append(found, f.String())
		}
		if ctx.Err() != nil {
			return nil // a signal: the command's own shutdown answers it
		}
		switch {
		case definite:
			return fmt.Errorf("--%s: %s", flagBrokers, strings.Join(found, "; "))
		case !time.Now().Before(deadline):
			return fmt.Errorf("--%s: no Kafka broker answered within --%s %s: %s", flagBrokers, flagConnectTimeout, k.connectTimeout, strings.Join(found, "; "))
		}
		log.Warn("no Kafka broker answers yet; retrying", "found", strings.Join(found, "; "), "gives_up_in", time.Until(deadline).Round(time.Second).String())
		if eos.Sleep(ctx, min(wait, time.Until(deadline))) != nil {
			return nil
		}
	}
}

// withPort is a --brokers address with Kafka's port 9092 when it names
// none, as the client reads it.
func withPort(addr string) string {
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return net.JoinHostPort(addr, "9092")
	}
	return addr
}
