// Package kafkaacl turns a broker's refusal (an authorization or
// authentication error) into one line that names the principal, the
// resource, the operation and the kafka-acls command that grants it, so
// that whoever reads a crash-looping pod's last line knows what to grant.
package kafkaacl

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// Resource types, as kafka-acls names them (--topic, --group,
// --transactional-id, --cluster).
const (
	Topic           = "topic"
	Group           = "group"
	TransactionalID = "transactional-id"
	Cluster         = "cluster"
)

// Target is a resource a request needs, and the operation on it.
type Target struct {
	Type      string // Topic, Group, TransactionalID or Cluster
	Name      string // "" for the cluster
	Operation string // READ, WRITE, DESCRIBE, ...
}

// Error is a request the broker refused for want of a right (or, with Type
// "", a sign-in it refused). Errors.Is matches the Kafka error.
type Error struct {
	// Principal is who was refused, "User:NAME"; empty until the caller
	// that knows the credentials fills it in (WithPrincipal).
	Principal string
	Request   string // the refused request: Produce, AddPartitionsToTxn, ...
	Target           // what it needed; Type "" for an authentication failure
	Err       error  // the Kafka error
}

func (e *Error) principal() string {
	if e.Principal == "" {
		return "User:<your principal>"
	}
	return e.Principal
}

func (e *Error) Error() string {
	if e.Type == "" {
		return fmt.Sprintf("not authenticated: the brokers refused %s (%s: %v); check the SASL mechanism, user and password, and the TLS client certificate",
			e.principal(), e.Request, e.Err)
	}
	what := e.Type
	if e.Name != "" {
		what += fmt.Sprintf(" %q", e.Name)
	}
	return fmt.Sprintf("not authorized: %s may not %s %s (%s: %v); grant it with: %s",
		e.principal(), e.Operation, what, e.Request, kerrName(e.Err), e.Command())
}

// Command is the kafka-acls command that grants the missing right.
func (e *Error) Command() string {
	if e.Type == "" {
		return ""
	}
	res := "--" + e.Type
	if e.Name != "" {
		res += " " + e.Name
	}
	return fmt.Sprintf("kafka-acls.sh --bootstrap-server BROKER --command-config ADMIN.properties --add --allow-principal %s --operation %s %s",
		e.principal(), opName(e.Operation), res)
}

// Unwrap returns the Kafka error.
func (e *Error) Unwrap() error { return e.Err }

// opName is kafka-acls' spelling of an operation: Write, IdempotentWrite.
func opName(op string) string {
	var b strings.Builder
	for _, part := range strings.Split(strings.ToLower(op), "_") {
		if part != "" {
			b.WriteString(strings.ToUpper(part[:1]) + part[1:])
		}
	}
	return b.String()
}

func kerrName(err error) string {
	if ke, ok := errors.AsType[*kerr.Error](err); ok {
		return ke.Message
	}
	return fmt.Sprint(err)
}

// typeOf is the resource type an authorization error is about, "" for
// authentication, and ok false for any other error.
func typeOf(err error) (typ string, ok bool) {
	switch {
	case errors.Is(err, kerr.TopicAuthorizationFailed):
		return Topic, true
	case errors.Is(err, kerr.GroupAuthorizationFailed):
		return Group, true
	case errors.Is(err, kerr.TransactionalIDAuthorizationFailed):
		return TransactionalID, true
	case errors.Is(err, kerr.ClusterAuthorizationFailed):
		return Cluster, true
	case errors.Is(err, kerr.SaslAuthenticationFailed):
		return "", true
	}
	return "", false
}

// Is reports whether err is a refusal: authorization or authentication.
func Is(err error) bool {
	_, ok := typeOf(err)
	return ok
}

// Classify returns err unchanged unless it is a refusal; then it returns
// an *Error for request, naming the target whose type the Kafka error is
// about (the first target of that type), wrapping err. An authorization
// error about a type no target has still becomes an *Error, without a name.
func Classify(err error, request string, targets ...Target) error {
	typ, ok := typeOf(err)
	if !ok {
		return err
	}
	if _, already := errors.AsType[*Error](err); already {
		return err
	}
	e := &Error{Request: request, Err: err, Target: Target{Type: typ}}
	for _, t := range targets {
		if t.Type == typ {
			e.Target = t
			break
		}
	}
	if typ != "" && e.Operation == "" {
		e.Operation = "use"
	}
	return e
}

// WithPrincipal fills in the principal of the *Error in err's chain, if
// any and if not set yet, and returns err. Messages wrapped around it
// earlier keep the old text: print the *Error itself (errors.AsType).
func WithPrincipal(err error, principal string) error {
	if e, ok := errors.AsType[*Error](err); ok && e.Principal == "" {
		e.Principal = principal
	}
	return err
}

// ListTopics is adm.ListTopics, except that a topic the principal may not
// describe is a TopicDetail holding its refusal, not the error of the whole
// listing as kadm has it, so that the line about the refusal can name the
// topic: after a refused listing it lists each topic alone.
func ListTopics(ctx context.Context, adm *kadm.Client, topics ...string) (kadm.TopicDetails, error) {
	all, err := adm.ListTopics(ctx, topics...)
	if !Is(err) {
		return all, err
	}
	out := kadm.TopicDetails{}
	for _, t := range topics {
		d, err := adm.ListTopics(ctx, t)
		switch {
		case Is(err):
			out[t] = kadm.TopicDetail{Topic: t, Err: err}
		case err != nil:
			return nil, err
		default:
			maps.Copy(out, d)
		}
	}
	return out, nil
}
