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
	flagSASLMechanism   = "sasl-mechanism"
	flagSASLUser        = "sasl-user"
	flagSASLPassword    = "sasl-password"
	flagKafkaMaxVersion = "kafka-max-version"
)

type kafkaConfig struct {
	brokers                   cli.StringSlice
	tls                       bool
	tlsCA, tlsCert, tlsKey    string
	saslMechanism, user, pass string
	maxVersion                string
}

func (k *kafkaConfig) flags() []cli.Flag {
	return []cli.Flag{
		brokersFlag(&k.brokers, []string{loop.DefaultBroker}, "Kafka seed brokers, host:port (repeat, or comma-separate)"),
		boolFlag(flagKafkaTLS, &k.tls, "connect to Kafka with TLS"),
		stringFlag(flagKafkaTLSCA, &k.tlsCA, "", "PEM `FILE` of CAs to trust for Kafka TLS (default: the system pool)"),
		stringFlag(flagKafkaTLSCert, &k.tlsCert, "", "PEM `FILE` of a client certificate for Kafka mTLS"),
		stringFlag(flagKafkaTLSKey, &k.tlsKey, "", "PEM `FILE` of the client certificate's key"),
		stringFlag(flagSASLMechanism, &k.saslMechanism, "", "Kafka SASL mechanism: plain, scram-sha-256 or scram-sha-512 (default: none)"),
		stringFlag(flagSASLUser, &k.user, "", "SASL user name"),
		stringFlag(flagSASLPassword, &k.pass, "", "SASL password (prefer FLAKESTREAM_SASL_PASSWORD to a flag)"),
		stringFlag(flagKafkaMaxVersion, &k.maxVersion, "", "speak the Kafka protocol of at most this release (e.g. 3.9), for brokers or features a newer protocol trips on (default: the newest both sides know)"),
	}
}

// brokersFlag is --brokers; bench gives it no default (an embedded kfake).
func brokersFlag(dst *cli.StringSlice, value []string, usage string) cli.Flag {
	return stringSliceFlag(flagBrokers, dst, value, usage)
}

// tlsConfig is a TLS client configuration from PEM files, as the Kafka
// and the schema-registry flags give them: ca ("" for the system pool), a
// client certificate and its key (cert "" for none). The flag names say,
// in an error, which flag to fix.
func tlsConfig(ca, cert, key, flagCA, flagCert, flagKey string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return nil, fmt.Errorf("--%s: %w", flagCA, err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--%s %s: no PEM certificate in it", flagCA, ca)
		}
	}
	if cert != "" {
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return nil, fmt.Errorf("--%s/--%s: %w", flagCert, flagKey, err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}

// opts turns the Kafka security flags into franz-go options.
func (k *kafkaConfig) opts() ([]kgo.Opt, error) {
	var opts []kgo.Opt
	if k.tls || k.tlsCA != "" || k.tlsCert != "" {
		cfg, err := tlsConfig(k.tlsCA, k.tlsCert, k.tlsKey, flagKafkaTLSCA, flagKafkaTLSCert, flagKafkaTLSKey)
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
