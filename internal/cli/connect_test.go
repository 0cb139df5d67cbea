package cli

import (
	"context"
	"crypto/tls"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/flakestream/flakestream/test/testenv"
	"github.com/twmb/franz-go/pkg/kfake"
)

// A --brokers address that is not Kafka ends every command that reads
// Kafka with one line saying what is there, instead of retrying forever;
// one that answers nothing ends it after --connect-timeout. The exit code
// is each command's runtime error (verify's is 2).
func TestBrokersThatAreNotKafka(t *testing.T) {
	redisAddr := testenv.RedisServer(t).Addr
	cert, _ := selfSigned(t)
	tlsKafka, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.TLS(&tls.Config{Certificates: []tls.Certificate{cert}}))
	if err != nil {
		t.Fatal(err)
	}
	defer tlsKafka.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() { // accepts and never answers
		var held []net.Conn
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	common := []string{"--server-id", "1", "--worker-id", "1", "--input-topic", "in", "--output-topic", "out", "--log-level", "error"}
	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"run on redis", append([]string{"run", "--brokers", redisAddr, "--sequencer", "memory", "--http-addr", ""}, common...), 1,
			"flakestream: --brokers: " + redisAddr + " answered but is not Kafka (it looks like Redis)\n"},
		{"audit on redis", []string{"audit", "--brokers", redisAddr, "--input-topic", "out", "--http-addr", "", "--log-level", "error"}, 1,
			"flakestream: --brokers: " + redisAddr + " answered but is not Kafka (it looks like Redis)\n"},
		{"verify on redis", []string{"verify", "--brokers", redisAddr, "--input-topic", "in", "--output-topic", "out", "--log-level", "error"}, 2,
			"flakestream: --brokers: " + redisAddr + " answered but is not Kafka (it looks like Redis)\n"},
		{"replay on a tls listener", append([]string{"replay", "--brokers", tlsKafka.ListenAddrs()[0], "--redis", "redis://" + redisAddr}, common...), 1,
			"flakestream: --brokers: " + tlsKafka.ListenAddrs()[0] + " looks like TLS; set --kafka-tls\n"},
		{"run on a silent port", append([]string{"run", "--brokers", ln.Addr().String(), "--connect-timeout", "2s", "--sequencer", "memory", "--http-addr", ""}, common...), 1,
			"flakestream: --brokers: no Kafka broker answered within --connect-timeout 2s: " + ln.Addr().String() + " accepted the connection but answered nothing\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// The bound is the test's, not an assertion: --connect-timeout
			// (1m by default) ends each case well before it.
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			_, errOut, code := runAppContext(ctx, t, "", nil, c.args...)
			if ctx.Err() != nil {
				t.Fatalf("still running after 2m: %s", errOut)
			}
			if code != c.code || !strings.HasSuffix(errOut, c.want) || strings.Count(errOut, "flakestream: ") != 1 {
				t.Fatalf("exit %d, stderr %q; want %d and the line %q", code, errOut, c.code, c.want)
			}
		})
	}
}
