// Package kprobe tells what listens at a broker address: Kafka, Kafka
// behind TLS, or something else (Redis, HTTP, SSH), from the first bytes it
// answers with. The command line uses it at start, so that a --brokers
// address that is not Kafka ends the process with one line saying what is
// there, instead of a client retrying forever.
//
// It knows nothing of topics, groups or SASL: an address that answers as
// Kafka is Kafka, and the client takes it from there.
package kprobe

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Kind is what an address turned out to be.
type Kind int

const (
	// Unreachable: no answer (refused, no route, no such host, silent, or
	// closed without a word); it may still come up.
	Unreachable Kind = iota
	// Kafka: it answered as a Kafka broker does.
	Kafka
	// NotKafka: it answered, but not as Kafka; waiting will not help.
	NotKafka
	// TLSMismatch: it speaks TLS when the client does not, or Kafka in
	// plaintext when the client speaks TLS.
	TLSMismatch
)

// Finding is what Probe found at one address.
type Finding struct {
	Addr string
	Kind Kind
	// What says it in words: "answered but is not Kafka (it looks like
	// Redis)", "looks like TLS; set --kafka-tls", "connection refused".
	What string
}

func (f Finding) String() string { return f.Addr + " " + f.What }

// correlationID marks the probe's Kafka request.
const correlationID = 0x466c5354 // "FlST"

// kafkaRequest is a Kafka ApiVersions v0 request, size-prefixed: every
// broker version answers it, before any authentication.
func kafkaRequest() []byte {
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 0
	var b []byte
	b = binary.BigEndian.AppendUint16(b, uint16(req.Key()))
	b = binary.BigEndian.AppendUint16(b, uint16(req.Version))
	b = binary.BigEndian.AppendUint32(b, correlationID)
	b = binary.BigEndian.AppendUint16(b, uint16(len("flakestream-probe")))
	b = append(b, "flakestream-probe"...)
	b = req.AppendTo(b)
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(b))), b...)
}

// lineRequest is sent, on a second connection, to an address that said
// nothing to the Kafka request: line-based servers wait for a line end,
// and Redis for one before any NUL byte, which the Kafka request begins
// with. Redis answers PING, HTTP and SMTP servers call it a bad request;
// a Kafka broker reads it as a request size of over a gigabyte and closes.
var lineRequest = []byte("PING\r\n")

// quiet is how long a probe waits for the first bytes of an answer: a
// broker answers ApiVersions within milliseconds, so a longer silence is
// taken as none (and a slow broker is simply probed again later). A
// variable only so that tests of silence are quick.
var quiet = 3 * time.Second

// Probe dials addr, plain or with tlsCfg (nil: plain), and tells what
// listens there, within timeout in all. An address that
// says nothing to a Kafka request is asked in lines (Redis, HTTP), and then
// over the other transport, so that a TLS listener reached in plaintext
// (and the reverse) is named as such.
func Probe(ctx context.Context, addr string, tlsCfg *tls.Config, timeout time.Duration) Finding {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	f := probe(ctx, addr, tlsCfg, kafkaRequest())
	if !f.connected || f.Kind != Unreachable {
		return f.Finding
	}
	if tlsCfg == nil || f.handshook {
		if line := probe(ctx, addr, tlsCfg, lineRequest); line.Kind != Unreachable {
			return line.Finding
		}
	}
	if tlsCfg == nil {
		// Does it speak TLS? Any certificate will do to tell.
		if other := probe(ctx, addr, &tls.Config{InsecureSkipVerify: true}, kafkaRequest()); other.handshook { //nolint:gosec // only to tell TLS apart; nothing is sent but the probe
			return Finding{Addr: addr, Kind: TLSMismatch, What: "looks like TLS; set --kafka-tls"}
		}
	} else if plain := probe(ctx, addr, nil, kafkaRequest()); plain.Kind == Kafka {
		return Finding{Addr: addr, Kind: TLSMismatch, What: "answers Kafka without TLS; drop --kafka-tls (or use the TLS listener's port)"}
	}
	return f.Finding
}

// finding is a Finding with what the probe learnt on the way.
type finding struct {
	Finding
	connected bool // the TCP connection was made
	handshook bool // a TLS handshake completed
}

// probe makes one connection to addr, sends req and reads what comes back,
// within ctx's deadline.
func probe(ctx context.Context, addr string, tlsCfg *tls.Config, req []byte) finding {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return finding{Finding: Finding{Addr: addr, Kind: Unreachable, What: dialError(err)}}
	}
	defer conn.Close()
	deadline, _ := ctx.Deadline()
	_ = conn.SetDeadline(deadline)
	out := finding{connected: true, Finding: Finding{Addr: addr}}
	if tlsCfg != nil {
		// A server that waits for a line waits through a ClientHello too.
		if q := time.Now().Add(quiet); q.Before(deadline) {
			_ = conn.SetDeadline(q)
		}
		if conn, err = handshake(ctx, conn, addr, tlsCfg); err != nil {
			out.Kind, out.What = tlsFailure(err)
			return out
		}
		out.handshook = true
	}
	if _, err := conn.Write(req); err != nil {
		out.Kind, out.What = Unreachable, "closed the connection without answering"
		return out
	}
	_ = conn.SetDeadline(deadline)
	if q := time.Now().Add(quiet); q.Before(deadline) {
		_ = conn.SetReadDeadline(q)
	}
	buf := make([]byte, 64)
	n, err := io.ReadAtLeast(conn, buf, 8)
	buf = buf[:n]
	switch {
	case n >= 8 && isKafka(buf):
		out.Kind, out.What = Kafka, "is Kafka"
	case n >= 2 && isTLSRecord(buf):
		out.Kind, out.What = TLSMismatch, "looks like TLS; set --kafka-tls"
	case n > 0:
		out.Kind, out.What = NotKafka, "answered but is not Kafka ("+looksLike(buf)+")"
	case isTimeout(err):
		out.Kind, out.What = Unreachable, "accepted the connection but answered nothing"
	case remoteAlert(err) != "":
		// With TLS 1.3 a broker that requires a client certificate says
		// so after the handshake, on the first read.
		out.Kind, out.What = NotKafka, "refused the TLS session ("+remoteAlert(err)+"): it wants a client certificate signed by a CA it trusts (--kafka-tls-cert, --kafka-tls-key)"
	default:
		out.Kind, out.What = Unreachable, "closed the connection without answering"
	}
	return out
}

func handshake(ctx context.Context, conn net.Conn, addr string, tlsCfg *tls.Config) (net.Conn, error) {
	cfg := tlsCfg.Clone()
	if cfg.ServerName == "" {
		cfg.ServerName, _, _ = net.SplitHostPort(addr)
	}
	tc := tls.Client(conn, cfg)
	return tc, tc.HandshakeContext(ctx)
}

// remoteAlert is the TLS alert the server sent ("tls: certificate
// required"), "" if err is not one.
func remoteAlert(err error) string {
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Op == "remote error" && oe.Err != nil {
		return oe.Err.Error()
	}
	return ""
}

// tlsFailure says why a TLS handshake failed.
func tlsFailure(err error) (Kind, string) {
	var rh tls.RecordHeaderError
	switch {
	case errors.As(err, &rh):
		return NotKafka, "is not TLS (" + looksLike(rh.RecordHeader[:]) + ")"
	case errors.Is(err, io.EOF), isTimeout(err):
		// A plaintext Kafka broker reads a ClientHello as an oversized
		// request and closes; Probe then tries plaintext.
		return Unreachable, "did not complete a TLS handshake"
	}
	return NotKafka, "TLS handshake failed: " + err.Error()
}

// isKafka: a size that fits an ApiVersions response, then the probe's
// correlation ID.
func isKafka(b []byte) bool {
	size := binary.BigEndian.Uint32(b)
	return size >= 4 && size < 1<<20 && binary.BigEndian.Uint32(b[4:]) == correlationID
}

// isTLSRecord: b begins like a TLS alert or handshake record.
func isTLSRecord(b []byte) bool { return (b[0] == 0x15 || b[0] == 0x16) && b[1] == 0x03 }

// looksLike names the protocol of an answer's first bytes, or quotes them.
func looksLike(b []byte) string {
	s := string(b)
	switch {
	case len(b) >= 2 && isTLSRecord(b):
		return "it looks like TLS"
	case strings.HasPrefix(s, "+PONG"), strings.HasPrefix(s, "-ERR"), strings.HasPrefix(s, "-NOAUTH"), strings.HasPrefix(s, "-WRONGPASS"), strings.HasPrefix(s, "-DENIED"):
		return "it looks like Redis"
	case strings.HasPrefix(s, "HTTP/"):
		return "it looks like HTTP"
	case strings.HasPrefix(s, "SSH-"):
		return "it looks like SSH"
	}
	if i := bytes.IndexAny(b, "\r\n"); i > 0 {
		b = b[:i]
	}
	return fmt.Sprintf("its first bytes are %q", b[:min(len(b), 24)])
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout() || errors.Is(err, context.DeadlineExceeded)
}

// dialError is a dial error without Go's "dial tcp <addr>:" prefix.
func dialError(err error) string {
	if isTimeout(err) {
		return "did not accept the connection (timed out)"
	}
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Err != nil {
		err = oe.Err
	}
	return strings.TrimPrefix(err.Error(), "connect: ")
}
