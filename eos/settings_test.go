package eos

import (
	"errors"
	"os"
	"testing"
	"time"
)

// Validate fills every zero field with its default and refuses what no
// default can fix, with the sentinel its doc comment names.
func TestValidate(t *testing.T) {
	s := Config{Brokers: []string{"b:9092"}, Topics: []string{"orders"}, Group: "g"}
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	if s.InstanceID != host || s.MaxPollRecords != DefaultMaxPollRecords || s.TransactionTimeout != DefaultTransactionTimeout ||
		s.SessionTimeout != DefaultSessionTimeout || s.ShutdownTimeout != DefaultShutdownTimeout || s.TopicWait != DefaultTopicWait ||
		s.BackoffMin != DefaultBackoffMin || s.BackoffMax != DefaultBackoffMax || s.Logger == nil {
		t.Fatalf("defaults not filled in: %+v", s)
	}
	ok := Config{Brokers: []string{"b:9092"}, Topics: []string{"orders"}, Group: "g"}
	with := func(f func(*Config)) Config { c := ok; f(&c); return c }
	for _, c := range []struct {
		name string
		s    Config
		want error
	}{
		{"no brokers", with(func(s *Config) { s.Brokers = nil }), ErrNoBrokers},
		{"no topics", with(func(s *Config) { s.Topics = nil }), ErrNoInput},
		{"no group", with(func(s *Config) { s.Group = "" }), ErrNoGroup},
		{"poll records", with(func(s *Config) { s.MaxPollRecords = -1 }), ErrBadConfig},
		{"session timeout", with(func(s *Config) { s.SessionTimeout = time.Second }), ErrBadConfig},
		{"txn timeout low", with(func(s *Config) { s.TransactionTimeout = time.Millisecond }), ErrBadConfig},
		{"txn timeout high", with(func(s *Config) { s.TransactionTimeout = time.Hour }), ErrBadConfig},
		{"backoff", with(func(s *Config) { s.BackoffMin, s.BackoffMax = time.Second, time.Millisecond }), ErrBadConfig},
	} {
		if err := c.s.Validate(); !errors.Is(err, c.want) {
			t.Errorf("%s: Validate = %v, want %v", c.name, err, c.want)
		}
	}
}

// NoWait turns the CLI's "0 means no wait" into the field's "negative
// means no wait", and keeps a real wait.
func TestNoWait(t *testing.T) {
	if NoWait(0) >= 0 || NoWait(-time.Second) >= 0 || NoWait(time.Second) != time.Second {
		t.Fatalf("NoWait(0)=%s NoWait(-1s)=%s NoWait(1s)=%s", NoWait(0), NoWait(-time.Second), NoWait(time.Second))
	}
	s := Config{Topics: []string{"in"}}
	if err := s.CheckNotInput("out", "in"); !errors.Is(err, ErrSameTopic) {
		t.Fatalf("CheckNotInput = %v, want ErrSameTopic", err)
	}
}
