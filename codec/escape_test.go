package codec

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestAppendJSONString(t *testing.T) {
	for _, s := range []string{
		"", "plain", `"`, `\`, "\x00\x01\x1f\x7f", "\b\f\n\r\t", "é😀\u2028\u2029", "<>&",
		"bad\xff", "\xed\xa0\x80", "trunc\xe2\x82", strings.Repeat("ab\"", 50),
	} {
		got := appendJSONString([]byte("x"), s)[1:]
		if !json.Valid(got) || !utf8.Valid(got) {
			t.Errorf("appendJSONString(%q) = %s, not valid JSON in UTF-8", s, got)
			continue
		}
		var back string
		if err := json.Unmarshal(got, &back); err != nil {
			t.Fatalf("json.Unmarshal(%s): %v", got, err)
		}
		// Each byte of invalid UTF-8 becomes one U+FFFD, as a []rune
		// conversion does.
		if want := string([]rune(s)); back != want {
			t.Errorf("appendJSONString(%q) = %s, which decodes to %q", s, got, back)
		}
	}
}

func TestUnescape(t *testing.T) {
	tests := []struct{ raw, want string }{
		{``, ""},
		{`abc`, "abc"},
		{`\"\\\/\b\f\n\r\t`, "\"\\/\b\f\n\r\t"},
		{`\u0041\u00e9\u4e2d`, "Aé中"},
		{`\ud83d\ude00`, "😀"},
		{`\ud83d`, "\ufffd"},
		{`\ude00\ud83d`, "\ufffd\ufffd"},
		{`\ud83dx`, "\ufffdx"},
		{`\ud83d\u0041`, "\ufffdA"},
		{`\ud83d\ud83d\ude00`, "\ufffd😀"},
		{`é\u00e9`, "éé"},
	}
	for _, tt := range tests {
		if got := string(appendUnescaped(nil, []byte(tt.raw))); got != tt.want {
			t.Errorf("appendUnescaped(%q) = %q, want %q", tt.raw, got, tt.want)
		}
		// encoding/json is the reference for what a key means.
		var ref string
		if err := json.Unmarshal([]byte(`"`+tt.raw+`"`), &ref); err != nil || ref != tt.want {
			t.Errorf("encoding/json unescapes %q to %q (%v), the test wants %q", tt.raw, ref, err, tt.want)
		}
		if !unescapedEqual([]byte(tt.raw), tt.want) {
			t.Errorf("unescapedEqual(%q, %q) = false", tt.raw, tt.want)
		}
		for _, other := range []string{tt.want + "x", "x" + tt.want, strings.TrimSuffix(tt.want, "\ufffd")} {
			if other != tt.want && unescapedEqual([]byte(tt.raw), other) {
				t.Errorf("unescapedEqual(%q, %q) = true", tt.raw, other)
			}
		}
	}
}
