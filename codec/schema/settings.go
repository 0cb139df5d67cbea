package schema

import (
	"crypto/tls"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/flakestream/flakestream/codec"
	"github.com/twmb/franz-go/pkg/sr"
)

// SubjectStrategy names the output schema's subject, as the Confluent
// serializers' subject.name.strategy does.
type SubjectStrategy int

const (
	// TopicName: "<output topic>-value" (the default).
	TopicName SubjectStrategy = iota
	// RecordName: the record's fully qualified name (Avro record, Protobuf
	// message).
	RecordName
	// TopicRecordName: "<output topic>-<fully qualified name>".
	TopicRecordName
)

// String returns "topic", "record" or "topic-record".
func (s SubjectStrategy) String() string {
	switch s {
	case TopicName:
		return "topic"
	case RecordName:
		return "record"
	case TopicRecordName:
		return "topic-record"
	}
	return fmt.Sprintf("SubjectStrategy(%d)", int(s))
}

// ParseSubjectStrategy parses "topic", "record" or "topic-record" (or the
// Confluent class names TopicNameStrategy, RecordNameStrategy,
// TopicRecordNameStrategy); "" means topic.
func ParseSubjectStrategy(s string) (SubjectStrategy, error) {
	switch s {
	case "", "topic", "TopicNameStrategy":
		return TopicName, nil
	case "record", "RecordNameStrategy":
		return RecordName, nil
	case "topic-record", "TopicRecordNameStrategy":
		return TopicRecordName, nil
	}
	return 0, fmt.Errorf("schema: subject strategy %q: want topic, record or topic-record: %w", s, codec.ErrInvalidConfig)
}

func (s SubjectStrategy) subject(topic, fullName string) string {
	switch s {
	case RecordName:
		return fullName
	case TopicRecordName:
		return topic + "-" + fullName
	}
	return topic + "-value"
}

// Settings configures a [Format]. A zero field means its default.
type Settings struct {
	// Format is codec.ValueAvro or codec.ValueProtobuf. Required.
	Format codec.ValueFormat

	// URL is the registry's base URL (--schema-registry), or several
	// separated by commas, tried in turn. Required unless Client is set.
	// User info in the URL (https://user:pass@host) is basic auth.
	URL string
	// Username and Password, if Username is set, are basic auth, overriding
	// the URL's user info.
	Username, Password string
	// TLS, if set, configures HTTPS to the registry. Default: Go's defaults
	// (system roots) for https URLs.
	TLS *tls.Config
	// Timeout bounds each registry request. Default 5s. Negative is an
	// error.
	Timeout time.Duration
	// Client, if set, is used instead of building one from URL, Username,
	// Password, TLS and Timeout (tests, or options this struct lacks).
	Client *sr.Client

	// Strategy names the output subject. Default TopicName.
	Strategy SubjectStrategy
	// OutputTopic is the topic numbered records go to; it names the output
	// subject under TopicName and TopicRecordName. Required to number
	// (AppendNumbered) under those; the audit, which only reads, may leave
	// it empty.
	OutputTopic string

	// Field is the number field's name. Default codec.DefaultField.
	Field string
	// NumberFormat is the Avro type of an added number field: FormatString
	// gives "string", FormatNumber gives "long". Default FormatString. For a
	// field the writer schema already has (and for Protobuf), the field's
	// own type decides.
	NumberFormat codec.NumberFormat
	// MaxBytes is the largest value inspected; longer ones are
	// ClassTooLarge. Default codec.DefaultMaxBytes. Negative is an error.
	MaxBytes int
	// MaxDepth is the deepest nesting of records, arrays, maps (Avro) or
	// messages (Protobuf) a value may have, the top level being level 1;
	// deeper values are codec.ClassTooDeep. Default codec.DefaultMaxDepth
	// (64). Negative is an error.
	MaxDepth int
	// MaxElements is the most values a value may hold, counted at every
	// level: fields, array items, map entries (Avro); field occurrences and
	// packed items (Protobuf). More is codec.ClassTooManyElements, refused
	// before they are read when a block's count says so. Default
	// codec.DefaultMaxElements (100,000). Negative is an error.
	MaxElements int
	// AllowedSubjects, if set, is the allow-list of input schemas: subject
	// names, and schema IDs written in decimal. A value whose schema ID is
	// not in it, and is registered under none of its subjects, is
	// codec.ClassSchemaNotAllowed, before its schema is fetched or parsed.
	// Default (nil): every schema the registry has.
	AllowedSubjects []string

	// Valid, if set, vets an existing number, as codec.Config.Valid.
	Valid func(int64) error

	// UnknownTTL is how long a schema ID the registry answered 404 for is
	// remembered as unknown, so a stream of such records costs one request
	// per TTL, not one per record. Default 30s. Negative is an error.
	UnknownTTL time.Duration
	// Now is the clock, for tests. Default time.Now.
	Now func() time.Time

	// allowIDs and allowSubjects are AllowedSubjects parsed; both nil
	// without a list.
	allowIDs      map[int]bool
	allowSubjects map[string]bool
}

func (s *Settings) validate() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("schema: "+format+": %w", append(a, codec.ErrInvalidConfig)...)
	}
	if s.Format != codec.ValueAvro && s.Format != codec.ValueProtobuf {
		return bad("value format %q: want avro or protobuf", s.Format)
	}
	if s.Field == "" {
		s.Field = codec.DefaultField
	}
	if s.NumberFormat != codec.FormatString && s.NumberFormat != codec.FormatNumber {
		return bad("unknown number format %d", int(s.NumberFormat))
	}
	if s.Strategy < TopicName || s.Strategy > TopicRecordName {
		return bad("unknown subject strategy %d", int(s.Strategy))
	}
	switch {
	case s.MaxBytes < 0:
		return bad("max bytes %d is negative", s.MaxBytes)
	case s.MaxBytes == 0:
		s.MaxBytes = codec.DefaultMaxBytes
	}
	switch {
	case s.MaxDepth < 0:
		return bad("max depth %d is negative", s.MaxDepth)
	case s.MaxDepth == 0:
		s.MaxDepth = codec.DefaultMaxDepth
	}
	switch {
	case s.MaxElements < 0:
		return bad("max elements %d is negative", s.MaxElements)
	case s.MaxElements == 0:
		s.MaxElements = codec.DefaultMaxElements
	}
	for _, a := range s.AllowedSubjects {
		a = strings.TrimSpace(a)
		if a == "" {
			return bad("allowed subjects %q: an empty name", s.AllowedSubjects)
		}
		if s.allowIDs == nil {
			s.allowIDs, s.allowSubjects = map[int]bool{}, map[string]bool{}
		}
		if id, err := strconv.Atoi(a); err == nil && id >= 0 {
			s.allowIDs[id] = true
		} else {
			s.allowSubjects[a] = true
		}
	}
	switch {
	case s.Timeout < 0:
		return bad("registry timeout %s is negative", s.Timeout)
	case s.Timeout == 0:
		s.Timeout = 5 * time.Second
	}
	switch {
	case s.UnknownTTL < 0:
		return bad("unknown-schema ttl %s is negative", s.UnknownTTL)
	case s.UnknownTTL == 0:
		s.UnknownTTL = 30 * time.Second
	}
	if s.Now == nil {
		s.Now = time.Now
	}
	if s.Client == nil {
		cl, err := s.newClient()
		if err != nil {
			return err
		}
		s.Client = cl
	}
	return nil
}

// newClient builds the registry client from URL, credentials and TLS.
func (s *Settings) newClient() (*sr.Client, error) {
	if s.URL == "" {
		return nil, fmt.Errorf("schema: a registry URL is required for value format %s: %w", s.Format, codec.ErrInvalidConfig)
	}
	var urls []string
	user, pass := s.Username, s.Password
	for _, raw := range strings.Split(s.URL, ",") {
		u, err := url.Parse(strings.TrimSpace(raw))
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("schema: registry URL %q: want http(s)://host[:port]: %w", redact(raw), codec.ErrInvalidConfig)
		}
		if u.User != nil && user == "" {
			user = u.User.Username()
			pass, _ = u.User.Password()
		}
		u.User = nil
		urls = append(urls, u.String())
	}
	opts := []sr.ClientOpt{sr.URLs(urls...), sr.HTTPClient(&http.Client{Timeout: s.Timeout}), sr.UserAgent("flakestream")}
	if user != "" {
		opts = append(opts, sr.BasicAuth(user, pass))
	}
	if s.TLS != nil {
		opts = append(opts, sr.DialTLSConfig(s.TLS))
	}
	cl, err := sr.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("schema: registry client: %v: %w", err, codec.ErrInvalidConfig)
	}
	return cl, nil
}

// redact drops a password from a URL for an error message.
func redact(raw string) string {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil {
		return "(unparseable URL)"
	}
	return u.Redacted()
}
