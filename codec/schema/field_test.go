package schema

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"io"
	"log"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/flakestream/flakestream/codec"
	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"
	"google.golang.org/protobuf/reflect/protoreflect"
)

func TestFieldReadsTopLevelFieldsForTheIdempotencyKey(t *testing.T) {
	r, pid, fd := protoSetup(t)
	aid := r.register(t, "orders-value", sr.Schema{Schema: orderV2})
	avroF := newFormat(t, r, codec.ValueAvro, nil)
	protoF := newFormat(t, r, codec.ValueProtobuf, nil)

	v := v1Order("A-9")
	v["note"], v["channel"] = "rush", "WEB"
	av := avroValue(t, aid, orderV2, v)
	m := orderMsg(fd, "OrderInt")
	m.Set(m.Descriptor().Fields().ByName("order_no"), protoreflect.ValueOfInt64(77))
	pv := protoValue(t, pid, []int{2}, m)

	for _, tc := range []struct {
		name  string
		f     *Format
		value []byte
		field string
		want  string
		ok    bool
		class codec.Class
	}{
		{"avro string", avroF, av, "sku", "A-9", true, ""},
		{"avro int", avroF, av, "qty", "2", true, ""},
		{"avro union string", avroF, av, "note", "rush", true, ""},
		{"avro enum", avroF, av, "channel", "WEB", true, ""},
		{"avro absent", avroF, av, "nope", "", false, ""},
		{"avro array", avroF, av, "tags", "", false, codec.ClassMissingKey},
		{"avro not framed", avroF, []byte("x"), "sku", "", false, codec.ClassNotFramed},
		{"protobuf string", protoF, pv, "sku", "A-1", true, ""},
		{"protobuf int64", protoF, pv, "order_no", "77", true, ""},
		{"protobuf absent", protoF, pv, "nope", "", false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw, ok, err := tc.f.Field(ctx, tc.value, tc.field)
			if codec.ClassOf(err) != tc.class || (tc.class == "" && err != nil) {
				t.Fatalf("err = %v, want class %q", err, tc.class)
			}
			if string(raw) != tc.want || ok != tc.ok {
				t.Fatalf("Field = %q %v, want %q %v", raw, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestNumberReadsTheNumberBackForTheAudit(t *testing.T) {
	r, pid, fd := protoSetup(t)
	aid := r.register(t, "orders-value", sr.Schema{Schema: orderV1})
	for _, vf := range []codec.ValueFormat{codec.ValueAvro, codec.ValueProtobuf} {
		t.Run(string(vf), func(t *testing.T) {
			f := newFormat(t, r, vf, nil)
			value := avroValue(t, aid, orderV1, v1Order("A"))
			if vf == codec.ValueProtobuf {
				value = protoValue(t, pid, []int{1}, orderMsg(fd, "Order"))
			}
			if _, ok, err := f.Number(ctx, value); ok || err != nil {
				t.Fatalf("unnumbered: ok %v err %v", ok, err)
			}
			n, ok, err := f.Number(ctx, number(t, f, value, 123456789))
			if err != nil || !ok || n != 123456789 {
				t.Fatalf("Number = %d %v %v, want 123456789", n, ok, err)
			}
			if _, _, err := f.Number(ctx, []byte("{}")); codec.ClassOf(err) != codec.ClassNotFramed {
				t.Fatalf("not framed: err %v", err)
			}
		})
	}
}

func TestJSONFormatIsTheJSONCodec(t *testing.T) {
	c, err := codec.New(codec.Config{})
	if err != nil {
		t.Fatal(err)
	}
	f := codec.JSONFormat{C: c}
	for _, v := range []string{`{"a":1}`, `{"order_no":null}`, `{"order_no":"7"}`, `{"order_no":"07"}`, `[1]`, `{"a"`} {
		want := c.Inspect([]byte(v))
		got, err := f.Inspect(ctx, []byte(v))
		if err != nil || got != want {
			t.Fatalf("%s: Inspect = %+v %v, want %+v", v, got, err, want)
		}
		if want.Kind == codec.NeedsNumber {
			out, err := f.AppendNumbered(ctx, nil, []byte(v), got, 9)
			if err != nil || string(out) != string(c.AppendNumbered(nil, []byte(v), want, 9)) {
				t.Fatalf("%s: AppendNumbered = %s %v", v, out, err)
			}
			if n, ok, err := f.Number(ctx, out); n != 9 || !ok || err != nil {
				t.Fatalf("Number(%s) = %d %v %v", out, n, ok, err)
			}
		}
	}
}

func TestBasicAuthFromURLUserInfoAndSettings(t *testing.T) {
	reg := srfake.New(srfake.WithAuth("Basic " + base64.StdEncoding.EncodeToString([]byte("svc:s3cret"))))
	t.Cleanup(reg.Close)
	id, _, err := reg.RegisterSchema("orders-value", sr.Schema{Schema: orderV1})
	if err != nil {
		t.Fatal(err)
	}
	value := avroValue(t, id, orderV1, v1Order("A"))
	host := strings.TrimPrefix(reg.URL(), "http://")
	for _, tc := range []struct {
		name     string
		s        Settings
		wantAuth bool
	}{
		{"url user info", Settings{URL: "http://svc:s3cret@" + host}, true},
		{"settings", Settings{URL: reg.URL(), Username: "svc", Password: "s3cret"}, true},
		{"settings override url", Settings{URL: "http://bad:bad@" + host, Username: "svc", Password: "s3cret"}, true},
		{"none", Settings{URL: reg.URL()}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.s.Format, tc.s.OutputTopic = codec.ValueAvro, "out"
			f, err := New(tc.s)
			if err != nil {
				t.Fatal(err)
			}
			_, err = f.Inspect(ctx, value)
			if tc.wantAuth && err != nil {
				t.Fatalf("with credentials: %v", err)
			}
			var re *RegistryError
			if !tc.wantAuth && (!errors.As(err, &re) || re.StatusCode != 401 || errors.Is(err, codec.ErrUnavailable)) {
				t.Fatalf("without credentials: err = %v, want a non-retryable 401", err)
			}
			if err != nil && strings.Contains(err.Error(), "s3cret") {
				t.Fatalf("error leaks the password: %v", err)
			}
		})
	}
}

func TestTLS(t *testing.T) {
	reg := srfake.NewRegistry()
	srv := httptest.NewUnstartedServer(reg.Handler())
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the failed handshake below is expected
	srv.StartTLS()
	t.Cleanup(srv.Close)
	id, _, err := reg.RegisterSchema("orders-value", sr.Schema{Schema: orderV1})
	if err != nil {
		t.Fatal(err)
	}
	value := avroValue(t, id, orderV1, v1Order("A"))
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	f, err := New(Settings{Format: codec.ValueAvro, URL: srv.URL, OutputTopic: "out", TLS: &tls.Config{RootCAs: pool}})
	if err != nil {
		t.Fatal(err)
	}
	number(t, f, value, 5)
	// Without the CA the handshake fails: no answer, so retryable.
	f2, err := New(Settings{Format: codec.ValueAvro, URL: srv.URL, OutputTopic: "out"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f2.Inspect(ctx, value); !errors.Is(err, codec.ErrUnavailable) {
		t.Fatalf("untrusted certificate: err = %v", err)
	}
}

func TestUnknownIDIsRememberedForTheTTL(t *testing.T) {
	r := newRegistry(t)
	now := time.Unix(1000, 0)
	f := newFormat(t, r, codec.ValueAvro, func(s *Settings) {
		s.UnknownTTL = time.Minute
		s.Now = func() time.Time { return now }
	})
	value := append(appendFrame(nil, 1, nil), 0)
	for range 5 {
		if insp, _ := f.Inspect(ctx, value); insp.Class() != codec.ClassUnknownSchema {
			t.Fatalf("class %q", insp.Class())
		}
	}
	if n := r.gets.Load(); n != 1 {
		t.Fatalf("%d fetches within the TTL, want 1", n)
	}
	// Registered later, seen after the TTL.
	r.register(t, "orders-value", sr.Schema{Schema: orderV1})
	now = now.Add(2 * time.Minute)
	if insp, _ := f.Inspect(ctx, avroValue(t, 1, orderV1, v1Order("A"))); insp.Kind != codec.NeedsNumber {
		t.Fatalf("after the TTL: %v %v", insp.Kind, insp.Err())
	}
}

func TestSettingsErrors(t *testing.T) {
	for _, s := range []Settings{
		{Format: "json", URL: "http://x"},
		{Format: codec.ValueAvro, OutputTopic: "o"},                 // no URL
		{Format: codec.ValueAvro, URL: "ftp://x", OutputTopic: "o"}, // scheme
		{Format: codec.ValueAvro, URL: "http://x", OutputTopic: "o", MaxBytes: -1},
		{Format: codec.ValueAvro, URL: "http://x", OutputTopic: "o", Timeout: -1},
		{Format: codec.ValueAvro, URL: "http://x", OutputTopic: "o", Strategy: 7},
		{Format: codec.ValueAvro, URL: "http://x", OutputTopic: "o", NumberFormat: 5},
	} {
		if _, err := New(s); !errors.Is(err, codec.ErrInvalidConfig) {
			t.Errorf("New(%+v) = %v, want ErrInvalidConfig", s, err)
		}
	}
	if _, err := New(Settings{Format: codec.ValueAvro, URL: "http://a:1,https://b:2", Strategy: RecordName}); err != nil {
		t.Fatalf("two URLs, record strategy without topic: %v", err)
	}
	// Without an output topic a Format reads (the audit) but does not number.
	r := newRegistry(t)
	id := r.register(t, "orders-value", sr.Schema{Schema: orderV1})
	f := newFormat(t, r, codec.ValueAvro, func(s *Settings) { s.OutputTopic = "" })
	value := avroValue(t, id, orderV1, v1Order("A"))
	insp, err := f.Inspect(ctx, value)
	if err != nil || insp.Kind != codec.NeedsNumber {
		t.Fatalf("Inspect = %v %v", insp.Kind, err)
	}
	if _, err := f.AppendNumbered(ctx, nil, value, insp, 1); !errors.Is(err, codec.ErrInvalidConfig) {
		t.Fatalf("AppendNumbered without a topic: %v", err)
	}
}
