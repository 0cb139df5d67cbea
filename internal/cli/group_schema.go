package cli

import (
	"crypto/tls"
	"net/url"
	"strings"

	"github.com/flakestream/flakestream/codec"
	"github.com/flakestream/flakestream/codec/schema"
	"github.com/twmb/franz-go/pkg/sr/srfake"
	"github.com/urfave/cli/v2"
)

// The schema group: the encoding of order values and, for Avro and
// Protobuf, the schema registry. run, replay, audit, bench and demo share
// it, so the worker, replay and the audit read values the same way.
const (
	flagValueFormat            = "value-format"
	flagSchemaRegistry         = "schema-registry"
	flagSchemaRegistryUser     = "schema-registry-user"
	flagSchemaRegistryPassword = "schema-registry-password"
	flagSchemaRegistryTLSCA    = "schema-registry-tls-ca"
	flagSchemaRegistryTLSCert  = "schema-registry-tls-cert"
	flagSchemaRegistryTLSKey   = "schema-registry-tls-key"
	flagSchemaRegistryTLSName  = "schema-registry-tls-server-name"
	flagSubjectNameStrategy    = "subject-name-strategy"
	flagAllowedSubjects        = "allowed-subjects"
)

type schemaConfig struct {
	valueFormat     string
	url, user, pass string
	tlsFiles        tlsFiles
	strategy        string
	allowedSubjects cli.StringSlice
}

func (sc *schemaConfig) flags() []cli.Flag {
	return concat([]cli.Flag{
		stringFlag(flagValueFormat, &sc.valueFormat, string(codec.ValueJSON), "encoding of order values: json, or avro or protobuf in the Confluent wire format through --schema-registry"),
		stringFlag(flagSchemaRegistry, &sc.url, "", "schema registry `URL` (http(s)://[user:password@]host:port; several comma-separated are tried in turn), required for --value-format avro and protobuf"),
		stringFlag(flagSchemaRegistryUser, &sc.user, "", "schema registry basic-auth user, overriding the URL's user info"),
		stringFlag(flagSchemaRegistryPassword, &sc.pass, "", "schema registry basic-auth password (prefer FLAKESTREAM_SCHEMA_REGISTRY_PASSWORD to a flag)"),
	}, sc.tlsFiles.flags(flagSchemaRegistryTLSCA, flagSchemaRegistryTLSCert, flagSchemaRegistryTLSKey,
		"PEM `FILE` of CAs to trust for an https schema registry (default: the system pool)",
		"PEM `FILE` of a client certificate for schema registry mTLS",
		"PEM `FILE` of the schema registry client certificate's key"), []cli.Flag{
		sc.tlsFiles.serverNameFlag(flagSchemaRegistryTLSName, "name an https schema registry's certificate must carry, when it is not the host in --schema-registry"),
		stringFlag(flagSubjectNameStrategy, &sc.strategy, schema.TopicName.String(), "subject the output schema is registered under: topic (<output topic>-value), record (the record's full name) or topic-record (<output topic>-<full name>)"),
		stringSliceFlag(flagAllowedSubjects, &sc.allowedSubjects, nil, "input schemas that may be read: subject names and schema IDs, comma-separated; a value of any other schema is dead-lettered schema_not_allowed before its schema is fetched (default: any schema of the registry)"),
	})
}

// valueFormat parses --value-format; a bad value is a usage error.
func (sc *schemaConfig) parsedFormat() (codec.ValueFormat, error) {
	vf, err := codec.ParseValueFormat(sc.valueFormat)
	if err != nil {
		return "", usageErr("--%s %q: want json, avro or protobuf", flagValueFormat, sc.valueFormat)
	}
	return vf, nil
}

// format returns the Format the flags describe: JSON through cd, or Avro or
// Protobuf through the registry. outputTopic names the output subject
// ("" for the audit, which only reads); cd gives the number field, its
// format, the size limit and the validity check, so every format numbers
// by the same rules.
func (sc *schemaConfig) format(cd *codec.Codec, outputTopic string, numberFormat codec.NumberFormat, valid func(int64) error, maxBytes int) (codec.Format, error) {
	vf, err := sc.parsedFormat()
	if err != nil {
		return nil, err
	}
	if vf == codec.ValueJSON {
		return codec.JSONFormat{C: cd}, nil
	}
	if sc.url == "" {
		return nil, usageErr("--%s URL is required for --%s %s", flagSchemaRegistry, flagValueFormat, vf)
	}
	strategy, err := schema.ParseSubjectStrategy(sc.strategy)
	if err != nil {
		return nil, usageErr("--%s %q: want topic, record or topic-record", flagSubjectNameStrategy, sc.strategy)
	}
	tlsCfg, err := sc.tls()
	if err != nil {
		return nil, err
	}
	f, err := schema.New(schema.Settings{
		Format: vf, URL: sc.url, Username: sc.user, Password: sc.pass, TLS: tlsCfg,
		Strategy: strategy, OutputTopic: outputTopic,
		Field: cd.FieldName(), NumberFormat: numberFormat, MaxBytes: maxBytes, Valid: valid,
		MaxDepth: cd.MaxDepth(), MaxElements: cd.MaxElements(), AllowedSubjects: sc.allowedSubjects.Value(),
	})
	return f, asUsage(err)
}

// tls builds the registry's TLS configuration, or nil for Go's defaults.
func (sc *schemaConfig) tls() (*tls.Config, error) {
	if !sc.tlsFiles.given() {
		return nil, nil
	}
	return sc.tlsFiles.config()
}

// embeddedRegistry, for demo and bench: when the value format needs a
// registry and --schema-registry is not given, it starts franz-go's
// in-memory registry (srfake) on 127.0.0.1 and points the flags at it. stop
// closes it (a no-op otherwise); kind says which registry is used.
func (sc *schemaConfig) embeddedRegistry() (kind string, stop func(), err error) {
	vf, err := sc.parsedFormat()
	if err != nil {
		return "", nil, err
	}
	switch {
	case vf == codec.ValueJSON:
		return "", func() {}, nil
	case sc.url != "":
		return redactURL(sc.url), func() {}, nil
	}
	r := srfake.New()
	sc.url = r.URL()
	return "srfake (embedded) " + r.URL(), r.Close, nil
}

// redactURL drops passwords from a (comma-separated) registry URL for a
// log line.
func redactURL(raw string) string {
	var out []string
	for _, part := range strings.Split(raw, ",") {
		if u, err := url.Parse(strings.TrimSpace(part)); err == nil {
			out = append(out, u.Redacted())
		}
	}
	return strings.Join(out, ",")
}
