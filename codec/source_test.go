package codec

import (
	"errors"
	"math"
	"testing"
)

func TestSourceRoundTrip(t *testing.T) {
	tests := []struct {
		topic     string
		partition int32
		offset    int64
		want      string
	}{
		{"orders", 0, 0, "orders/0/0"},
		{"orders.v2_eu-1", 12, 1234567, "orders.v2_eu-1/12/1234567"},
		{"a/b", math.MaxInt32, math.MaxInt64, "a/b/2147483647/9223372036854775807"},
		{"/", 1, 2, "//1/2"},
	}
	for _, tt := range tests {
		got := AppendSource([]byte("x"), tt.topic, tt.partition, tt.offset)
		if string(got) != "x"+tt.want {
			t.Errorf("AppendSource(%q, %d, %d) = %q, want %q", tt.topic, tt.partition, tt.offset, got[1:], tt.want)
		}
		topic, partition, offset, err := ParseSource(tt.want)
		if err != nil || topic != tt.topic || partition != tt.partition || offset != tt.offset {
			t.Errorf("ParseSource(%q) = %q, %d, %d, %v; want %q, %d, %d",
				tt.want, topic, partition, offset, err, tt.topic, tt.partition, tt.offset)
		}
	}
}

func TestParseSourceErrors(t *testing.T) {
	for _, s := range []string{
		"", "orders", "orders/1", "/1/2", "orders//2", "orders/1/", "orders/-1/2", "orders/1/-2",
		"orders/+1/2", "orders/01/2", "orders/1/02", "orders/2147483648/0", "orders/0/9223372036854775808",
		"orders/1/2x", "orders/ 1/2", "orders/1_0/2", "orders/0x1/2",
	} {
		if _, _, _, err := ParseSource(s); !errors.Is(err, ErrInvalidSource) {
			t.Errorf("ParseSource(%q) error = %v, want ErrInvalidSource", s, err)
		}
	}
}
