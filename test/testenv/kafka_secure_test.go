package testenv

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// A secured broker with required client certificates: the super user
// creates a topic; a new SCRAM user is denied until it is granted WRITE,
// then produces; the script's PLAIN user signs in; a wrong password and a
// client without a certificate are refused.
func TestSecureKafka(t *testing.T) {
	c := RealKafka(t, KafkaSecured(ClientAuthRequired))
	s := c.Secure()
	if s == nil || s.ClientAuth != ClientAuthRequired || len(s.Users) == 0 {
		t.Fatalf("secure %+v", s)
	}
	topic := c.NewTopic(t, 1)
	user, pw := c.CreateUser(t, "writer")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	cl := c.ClientAs(t, user, pw, kgo.DefaultProduceTopic(topic), kgo.RecordRetries(2))
	err := cl.ProduceSync(ctx, kgo.StringRecord("denied")).FirstErr()
	if !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("produce without an ACL: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	c.AddACLs(t, kadm.NewACLs().Allow("User:"+user).Topics(topic).Operations(kadm.OpWrite).ResourcePatternType(kadm.ACLPatternLiteral))
	for {
		cl := c.ClientAs(t, user, pw, kgo.DefaultProduceTopic(topic))
		if err = cl.ProduceSync(ctx, kgo.StringRecord("allowed")).FirstErr(); err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("produce with WRITE: %v", err)
		}
		time.Sleep(200 * time.Millisecond) // the ACL reaches the broker's authorizer a moment later
	}

	tlsCfg, err := s.TLSConfig(true)
	if err != nil {
		t.Fatal(err)
	}
	for name, pw := range s.Users {
		pl := kafkaTryClient(t, c, kgo.DialTLSConfig(tlsCfg), kgo.SASL(plain.Auth{User: name, Pass: pw}.AsMechanism()))
		if _, err := kadm.NewClient(pl).BrokerMetadata(ctx); err != nil {
			t.Errorf("PLAIN user %s: %v", name, err)
		}
	}
	bad := kafkaTryClient(t, c, kgo.DialTLSConfig(tlsCfg), kgo.SASL(scram.Auth{User: user, Pass: "wrong"}.AsSha512Mechanism()))
	if _, err := kadm.NewClient(bad).BrokerMetadata(ctx); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Errorf("a wrong password: %v, want SASL_AUTHENTICATION_FAILED", err)
	}
	noCert, err := s.TLSConfig(false)
	if err != nil {
		t.Fatal(err)
	}
	nc := kafkaTryClient(t, c, kgo.DialTLSConfig(noCert), kgo.SASL(scram.Auth{User: user, Pass: pw}.AsSha512Mechanism()))
	hctx, hcancel := context.WithTimeout(ctx, 20*time.Second)
	defer hcancel()
	if _, err := kadm.NewClient(nc).BrokerMetadata(hctx); err == nil {
		t.Error("a client without a certificate signed in, though the broker requires one")
	} else {
		t.Logf("without a client certificate: %v", err)
	}
}

// kafkaTryClient is a client of c's addresses with exactly opts (no
// sign-in of its own), closed at the end of t.
func kafkaTryClient(t *testing.T, c *KafkaCluster, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.Addrs...), kgo.RequestRetries(1)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// A secured 3-node cluster: the super user creates a replicated topic, and
// a user granted WRITE and READ commits a transaction and reads it back.
func TestSecureKafkaCluster(t *testing.T) {
	c := RealKafkaCluster(t, 3, KafkaSecured(""))
	topic := c.NewTopic(t, 3)
	user, pw := c.CreateUser(t, "txn")
	txnID := KafkaTopicName(t)
	c.AddACLs(t, kadm.NewACLs().Allow("User:"+user).Topics(topic).Operations(kadm.OpWrite, kadm.OpRead, kadm.OpDescribe).
		ResourcePatternType(kadm.ACLPatternLiteral))
	c.AddACLs(t, kadm.NewACLs().Allow("User:"+user).TransactionalIDs(txnID).Operations(kadm.OpWrite, kadm.OpDescribe).
		ResourcePatternType(kadm.ACLPatternLiteral))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var err error
	for {
		cl := c.ClientAs(t, user, pw, kgo.TransactionalID(txnID), kgo.DefaultProduceTopic(topic))
		if err = cl.BeginTransaction(); err == nil {
			err = cl.ProduceSync(ctx, kgo.StringRecord("secured")).FirstErr()
			if eerr := cl.EndTransaction(ctx, err == nil); err == nil {
				err = eerr
			}
		}
		if err == nil || ctx.Err() != nil {
			break
		}
		time.Sleep(200 * time.Millisecond) // until the ACLs reach every broker
	}
	if err != nil {
		t.Fatalf("transaction as %s: %v", user, err)
	}
	r := c.ClientAs(t, user, pw, kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	for got := 0; got == 0; {
		fs := r.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read back: %v", fs.Err())
		}
		got = fs.NumRecords()
	}
}

// docs/security.md's ACL table parses, and gives every command of the data
// path its rows and none of them a right on the cluster.
func TestACLTable(t *testing.T) {
	rows := ACLTable(t)
	by := map[string]int{}
	for _, r := range rows {
		by[r.Command]++
		if r.Resource == "cluster" && (r.Command == "run" || r.Command == "replay" || r.Command == "verify" || r.Command == "audit") {
			t.Errorf("%s needs a right on the cluster: %+v", r.Command, r)
		}
	}
	for _, c := range []string{"run", "replay", "verify", "audit"} {
		if by[c] == 0 {
			t.Errorf("no row for %s", c)
		}
	}
	if _, err := parseACLTable("| command | resource | name | pattern | operations |\n|---|---|---|---|---|\n| run | topic | x | literal | FLY |\n"); err == nil {
		t.Error("an unknown operation parsed")
	}
}
