package pipeline

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/flakestream/flakestream/codec"
	"github.com/flakestream/flakestream/codec/schema"
	"github.com/flakestream/flakestream/test/pipetest"
	"github.com/flakestream/flakestream/test/testenv"
	"github.com/twmb/franz-go/pkg/sr/srfake"
)

// interopPython is the python of the venv scripts/interop-venv makes, from
// FLAKESTREAM_INTEROP_PYTHON. Without it the test skips with the reason;
// under CI=true it fails.
func interopPython(t *testing.T) string {
	t.Helper()
	py := os.Getenv("FLAKESTREAM_INTEROP_PYTHON")
	why := ""
	if py == "" {
		why = "FLAKESTREAM_INTEROP_PYTHON is not set (make test-interop, or scripts/interop-venv prints the path)"
	} else if _, err := os.Stat(py); err != nil {
		why = fmt.Sprintf("FLAKESTREAM_INTEROP_PYTHON=%s: %v", py, err)
	}
	if why != "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("interop: %s (CI=true)", why)
		}
		t.Skipf("interop: %s", why)
	}
	return py
}

func runInterop(t *testing.T, py string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, append([]string{"../scripts/interop_worker.py"}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("python interop_worker.py %v: %v\n%s", args, err, stderr.String())
	}
	return out
}

// A client the project did not write, end to end on a real broker:
// Confluent's Python client produces Avro and Protobuf orders with its
// serializers (which register the writer schema), the worker numbers them
// through the same registry (srfake on 127.0.0.1, reached by Python over
// HTTP), and Confluent's deserializers read the numbered topic back
// (read_committed) with the output schema each value's ID names: every
// order once, its number field equal to its number header.
func TestConfluentPythonWorkerInterop(t *testing.T) {
	py := interopPython(t)
	k := testenv.RealKafka(t)
	for _, vf := range []codec.ValueFormat{codec.ValueAvro, codec.ValueProtobuf} {
		t.Run(string(vf), func(t *testing.T) {
			e := &pipetest.Env{Kafka: k, Redis: testenv.RedisServer(t), Prefix: "interop" + fmt.Sprint(time.Now().UnixNano()),
				Partitions: 3, Codec: pipetest.Codec(t)}
			e.Input = k.NewTopic(t, 3)
			e.Out, e.DLQ, e.Group = e.Input+".out", e.Input+".dlq", e.Input+"-g"
			k.CreateTopic(t, e.Out, 3)
			k.CreateTopic(t, e.DLQ, 3)
			reg := srfake.New()
			t.Cleanup(reg.Close)
			const n = 50
			brokers := strings.Join(k.Addrs, ",")
			runInterop(t, py, "produce", string(vf), brokers, e.Input, reg.URL(), fmt.Sprint(n))
			f, err := schema.New(schema.Settings{Format: vf, URL: reg.URL(), OutputTopic: e.Out})
			if err != nil {
				t.Fatal(err)
			}
			wk := start(t, e, "interop", Format(f))
			out := runInterop(t, py, "consume", string(vf), brokers, e.Out, reg.URL(), fmt.Sprint(n))
			wk.stop(t)
			seen := map[string]bool{}
			sc := bufio.NewScanner(bytes.NewReader(out))
			for sc.Scan() {
				var line struct {
					Value  map[string]any `json:"value"`
					Number string         `json:"number"`
				}
				if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
					t.Fatal(err)
				}
				sku, _ := line.Value["sku"].(string)
				if line.Number == "" || line.Value["order_no"] != line.Number || !strings.HasPrefix(sku, "SKU-") || seen[sku] {
					t.Fatalf("python read %s", sc.Text())
				}
				seen[sku] = true
			}
			if len(seen) != n {
				t.Fatalf("python read %d distinct orders, want %d", len(seen), n)
			}
			if dlq, _ := e.ReadTopic(e.DLQ); len(dlq) != 0 {
				t.Fatalf("%d orders dead-lettered, want 0", len(dlq))
			}
		})
	}
}
