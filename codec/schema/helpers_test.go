package schema

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/bufbuild/protocompile"
	"github.com/flakestream/flakestream/codec"
	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// The test registry is franz-go's in-memory srfake: no real Schema Registry
// installs here (see docs/formats.md). srfake checks no compatibility,
// so the tests check BACKWARD compatibility themselves with hamba's checker.

const (
	orderV1 = `{"type":"record","name":"Order","namespace":"shop","fields":[
		{"name":"sku","type":"string"},
		{"name":"qty","type":"int"},
		{"name":"price","type":"double"},
		{"name":"tags","type":{"type":"array","items":"string"}},
		{"name":"attrs","type":{"type":"map","values":"long"}},
		{"name":"note","type":["null","string"],"default":null}]}`
	orderV2 = `{"type":"record","name":"Order","namespace":"shop","fields":[
		{"name":"sku","type":"string"},
		{"name":"qty","type":"int"},
		{"name":"price","type":"double"},
		{"name":"tags","type":{"type":"array","items":"string"}},
		{"name":"attrs","type":{"type":"map","values":"long"}},
		{"name":"note","type":["null","string"],"default":null},
		{"name":"channel","type":{"type":"enum","name":"Channel","symbols":["APP","WEB"]},"default":"APP"}]}`
	// orderWithNo already has a nullable number field.
	orderWithNo = `{"type":"record","name":"Order","namespace":"shop","fields":[
		{"name":"sku","type":"string"},
		{"name":"order_no","type":["null","string"],"default":null},
		{"name":"qty","type":"int"}]}`
	orderWithLongNo = `{"type":"record","name":"Order","namespace":"shop","fields":[
		{"name":"sku","type":"string"},
		{"name":"order_no","type":["null","long"],"default":null}]}`
)

func v1Order(sku string) map[string]any {
	return map[string]any{"sku": sku, "qty": 2, "price": 59.9, "tags": []any{"gift"},
		"attrs": map[string]any{"w": int64(3)}, "note": nil}
}

// testRegistry is srfake with request counters and a switchable failure.
type testRegistry struct {
	*srfake.Registry
	gets, posts atomic.Int64
	fail        atomic.Int64 // HTTP status to answer every request with, 0 for none
	failPost    atomic.Int64 // same, for POST only
}

func newRegistry(t testing.TB) *testRegistry {
	t.Helper()
	r := &testRegistry{Registry: srfake.New()}
	r.Intercept(func(w http.ResponseWriter, req *http.Request) bool {
		if req.Method == http.MethodPost {
			r.posts.Add(1)
		} else if strings.HasPrefix(req.URL.Path, "/schemas/ids/") {
			r.gets.Add(1)
		}
		code := int(r.fail.Load())
		if c := int(r.failPost.Load()); c != 0 && req.Method == http.MethodPost {
			code = c
		}
		if code == 0 {
			return false
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		io.WriteString(w, `{"error_code":`+itoa(code)+`,"message":"injected by the test"}`)
		return true
	})
	t.Cleanup(r.Close)
	return r
}

func itoa(n int) string { return string(appendInt(nil, n)) }
func appendInt(b []byte, n int) []byte {
	if n >= 10 {
		b = appendInt(b, n/10)
	}
	return append(b, byte('0'+n%10))
}

func (r *testRegistry) register(t testing.TB, subject string, s sr.Schema) int {
	t.Helper()
	id, _, err := r.RegisterSchema(subject, s)
	if err != nil {
		t.Fatalf("register %s: %v", subject, err)
	}
	return id
}

func newFormat(t testing.TB, r *testRegistry, vf codec.ValueFormat, mod func(*Settings)) *Format {
	t.Helper()
	s := Settings{Format: vf, URL: r.URL(), OutputTopic: "orders-numbered"}
	if mod != nil {
		mod(&s)
	}
	f, err := New(s)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func parseAvro(t testing.TB, text string) avro.Schema {
	t.Helper()
	s, err := avro.ParseWithCache(text, "", &avro.SchemaCache{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// avroValue frames v encoded with schema text as schema id.
func avroValue(t testing.TB, id int, text string, v any) []byte {
	t.Helper()
	b, err := avro.Marshal(parseAvro(t, text), v)
	if err != nil {
		t.Fatal(err)
	}
	return append(appendFrame(nil, id, nil), b...)
}

// decodeOutput decodes a numbered value with the schema its header names,
// fetched from the registry as a consumer would.
func decodeOutput(t testing.TB, f *Format, out []byte) (int, map[string]any) {
	t.Helper()
	id, bad := schemaID(out)
	if bad != nil {
		t.Fatalf("output is not framed: %v", bad)
	}
	s, err := f.Client().SchemaByID(context.Background(), id)
	if err != nil {
		t.Fatalf("output schema %d: %v", id, err)
	}
	var v any
	if err := avro.Unmarshal(parseAvro(t, s.Schema), out[headerLen:], &v); err != nil {
		t.Fatalf("output does not decode with its schema %d: %v", id, err)
	}
	m, ok := unwrapUnion(v).(map[string]any)
	if !ok {
		t.Fatalf("output decodes to %T, want a record", v)
	}
	return id, m
}

func compileProto(t testing.TB, files map[string]string, main string) protoreflect.FileDescriptor {
	t.Helper()
	comp := protocompile.Compiler{Resolver: protocompile.WithStandardImports(
		&protocompile.SourceResolver{Accessor: protocompile.SourceAccessorFromMap(files)})}
	fds, err := comp.Compile(context.Background(), main)
	if err != nil {
		t.Fatal(err)
	}
	return fds[0]
}
