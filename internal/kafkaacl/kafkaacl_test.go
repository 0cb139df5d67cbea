package kafkaacl

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// A refusal becomes one line naming the principal, the operation, the
// resource and the kafka-acls command; the Kafka error stays matchable.
func TestClassify(t *testing.T) {
	targets := []Target{{Topic, "orders.numbered", "WRITE"}, {TransactionalID, "flakestream-g-a", "WRITE"}}
	for _, tc := range []struct {
		err  error
		want []string
	}{
		{kerr.TopicAuthorizationFailed, []string{`User:w may not WRITE topic "orders.numbered"`, "(Produce: TOPIC_AUTHORIZATION_FAILED)",
			"kafka-acls.sh --bootstrap-server BROKER --command-config ADMIN.properties --add --allow-principal User:w --operation Write --topic orders.numbered"}},
		{kerr.TransactionalIDAuthorizationFailed, []string{`may not WRITE transactional-id "flakestream-g-a"`, "--operation Write --transactional-id flakestream-g-a"}},
		{kerr.GroupAuthorizationFailed, []string{"may not use group (Produce"}},
		{kerr.SaslAuthenticationFailed, []string{"not authenticated: the brokers refused User:w"}},
	} {
		err := WithPrincipal(Classify(fmt.Errorf("produce: %w", tc.err), "Produce", targets...), "User:w")
		if !errors.Is(err, tc.err) {
			t.Errorf("%v does not match %v", err, tc.err)
		}
		if strings.Contains(err.Error(), "\n") {
			t.Errorf("%q is not one line", err)
		}
		for _, s := range tc.want {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("%q lacks %q", err, s)
			}
		}
	}
	other := errors.New("broken pipe")
	if Classify(other, "Produce", targets...) != other || Is(other) {
		t.Error("a non-refusal was classified")
	}
}

func TestOpName(t *testing.T) {
	for in, want := range map[string]string{"WRITE": "Write", "DESCRIBE_CONFIGS": "DescribeConfigs", "idempotent_write": "IdempotentWrite"} {
		if got := opName(in); got != want {
			t.Errorf("opName(%q) = %q, want %q", in, got, want)
		}
	}
}
