package cli

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"strings"

	"github.com/flakestream/flakestream/pipeline/loop"
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
	flagKafkaTLSServer  = "kafka-tls-server-name"
	flagSASLMechanism   = "sasl-mechanism"
	flagSASLUser        = "sasl-user"
	flagSASLPassword    = "sasl-password"
	flagKafkaMaxVersion = "kafka-max-version"
)

type kafkaConfig struct {
	brokers                   cli.StringSlice
	tls                       bool
	tlsFiles                  tlsFiles
	saslMechanism, user, pass string
	maxVersion                string
}

func (k *kafkaConfig) flags() []cli.Flag {
	return concat([]cli.Flag{
		brokersFlag(&k.brokers, []string{loop.DefaultBroker}, "Kafka seed brokers, host:port (repeat, or comma-separate)"),
		boolFlag(flagKafkaTLS, &k.tls, "connect to Kafka with TLS"),
	}, k.tlsFiles.flags(flagKafkaTLSCA, flagKafkaTLSCert, flagKafkaTLSKey,
		"PEM `FILE` of CAs to trust for Kafka TLS (default: the system pool)",
		"PEM `FILE` of a client certificate for Kafka mTLS",
		"PEM `FILE` of the client certificate's key"), []cli.Flag{
		k.tlsFiles.serverNameFlag(flagKafkaTLSServer, "name every broker's certificate must carry, when it is not the host dialled (default: each broker's host, from --brokers and the metadata)"),
		stringFlag(flagSASLMechanism, &k.saslMechanism, "", "Kafka SASL mechanism: plain, scram-sha-256 or scram-sha-512 (default: none)"),
		stringFlag(flagSASLUser, &k.user, "", "SASL user name"),
		stringFlag(flagSASLPassword, &k.pass, "", "SASL password (prefer FLAKESTREAM_SASL_PASSWORD to a flag)"),
		stringFlag(flagKafkaMaxVersion, &k.maxVersion, "", "speak the Kafka protocol of at most this release (e.g. 3.9), for brokers or features a newer protocol trips on (default: the newest both sides know)"),
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
	flagCA, flagCert, flagKey string
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
		pair, err := tls.LoadX509KeyPair(t.cert, t.key)
		if err != nil {
			return nil, fmt.Errorf("--%s/--%s: %w", t.flagCert, t.flagKey, err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
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
	default:
		return nil, usageErr("--%s %q: want plain, scram-sha-256 or scram-sha-512", flagSASLMechanism, m)
	}
	return opts, nil
}
