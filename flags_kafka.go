package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kversion"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	"github.com/urfave/cli/v2"
)

func kafkaFlags() []cli.Flag {
	return []cli.Flag{
		stringSliceFlag("brokers", []string{"127.0.0.1:9092"}, "Kafka seed brokers, host:port (repeat, or comma-separate)"),
		boolFlag("kafka-tls", "connect to Kafka with TLS"),
		stringFlag("kafka-tls-ca", "", "PEM `FILE` of CAs to trust for Kafka TLS (default: the system pool)"),
		stringFlag("kafka-tls-cert", "", "PEM `FILE` of a client certificate for Kafka mTLS"),
		stringFlag("kafka-tls-key", "", "PEM `FILE` of the client certificate's key"),
		stringFlag("sasl-mechanism", "", "Kafka SASL mechanism: plain, scram-sha-256 or scram-sha-512 (default: none)"),
		stringFlag("sasl-user", "", "SASL user name"),
		stringFlag("sasl-password", "", "SASL password (prefer FLAKESTREAM_SASL_PASSWORD to a flag)"),
		stringFlag("kafka-max-version", "", "speak the Kafka protocol of at most this release (e.g. 3.9), for brokers or features a newer protocol trips on (default: the newest both sides know)"),
	}
}

// kafkaOptsFrom turns the Kafka security flags into franz-go options.
func kafkaOptsFrom(c *cli.Context) ([]kgo.Opt, error) {
	var opts []kgo.Opt
	if c.Bool("kafka-tls") || c.String("kafka-tls-ca") != "" || c.String("kafka-tls-cert") != "" {
		cfg := &tls.Config{MinVersion: tls.VersionTLS12}
		if ca := c.String("kafka-tls-ca"); ca != "" {
			pem, err := os.ReadFile(ca)
			if err != nil {
				return nil, fmt.Errorf("--kafka-tls-ca: %w", err)
			}
			cfg.RootCAs = x509.NewCertPool()
			if !cfg.RootCAs.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("--kafka-tls-ca %s: no PEM certificate in it", ca)
			}
		}
		if cert := c.String("kafka-tls-cert"); cert != "" {
			pair, err := tls.LoadX509KeyPair(cert, c.String("kafka-tls-key"))
			if err != nil {
				return nil, fmt.Errorf("--kafka-tls-cert/--kafka-tls-key: %w", err)
			}
			cfg.Certificates = []tls.Certificate{pair}
		}
		opts = append(opts, kgo.DialTLSConfig(cfg))
	}
	if v := c.String("kafka-max-version"); v != "" {
		versions := kversion.FromString(v)
		if versions == nil {
			return nil, &exitError{code: 2, err: fmt.Errorf("--kafka-max-version %q: want a release such as 3.9 or 4.0", v)}
		}
		opts = append(opts, kgo.MaxVersions(versions))
	}
	user, pass := c.String("sasl-user"), c.String("sasl-password")
	switch m := strings.ToLower(c.String("sasl-mechanism")); m {
	case "":
	case "plain":
		opts = append(opts, kgo.SASL(plain.Auth{User: user, Pass: pass}.AsMechanism()))
	case "scram-sha-256":
		opts = append(opts, kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha256Mechanism()))
	case "scram-sha-512":
		opts = append(opts, kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha512Mechanism()))
	default:
		return nil, &exitError{code: 2, err: fmt.Errorf("--sasl-mechanism %q: want plain, scram-sha-256 or scram-sha-512", m)}
	}
	return opts, nil
}

func opsFlags(httpAddr string) []cli.Flag {
	return append([]cli.Flag{
		stringFlag("http-addr", httpAddr, "serve /metrics, /healthz and /readyz on this address (\"\" turns it off)"),
	}, logFlags()...)
}

func logFlags() []cli.Flag {
	return []cli.Flag{
		stringFlag("log-format", "text", "log format: text or json"),
		stringFlag("log-level", "info", "log level: debug, info, warn or error"),
	}
}

// loggerFrom builds the structured logger the flags describe, on stderr.
func loggerFrom(c *cli.Context) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(c.String("log-level"))); err != nil {
		return nil, &exitError{code: 2, err: fmt.Errorf("--log-level %q: want debug, info, warn or error", c.String("log-level"))}
	}
	opts := &slog.HandlerOptions{Level: level}
	switch c.String("log-format") {
	case "text":
		return slog.New(slog.NewTextHandler(c.App.ErrWriter, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(c.App.ErrWriter, opts)), nil
	}
	return nil, &exitError{code: 2, err: fmt.Errorf("--log-format %q: want text or json", c.String("log-format"))}
}

// newRegistry returns a registry with the Go runtime and process collectors.
func newRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// withTimeout runs f with ctx bounded by d.
func withTimeout(ctx context.Context, d time.Duration, f func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	return f(ctx)
}
