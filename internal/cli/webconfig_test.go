package cli

import (
	"crypto/tls"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/flakestream/flakestream/test/accounting"
	"github.com/flakestream/flakestream/test/testenv"
	"github.com/twmb/franz-go/pkg/kfake"
	"golang.org/x/crypto/bcrypt"
)

// --web-config-file puts TLS and basic auth, as Prometheus exporters do,
// on both listeners: over https, a request without the user's password
// is 401 and with it 200; a plain http request gets no metrics. A file
// that cannot be used is one line and exit code 2, before anything is
// served.
func TestWebConfigFile(t *testing.T) {
	ca := testenv.NewTestCA(t)
	cert, key := ca.Issue(t, "metrics", "127.0.0.1")
	hash, err := bcrypt.GenerateFromPassword([]byte("scrape-pass"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cfgFile := filepath.Join(dir, "web.yml")
	cfg := "tls_server_config:\n  cert_file: " + cert + "\n  key_file: " + key + "\nbasic_auth_users:\n  prometheus: " + string(hash) + "\n"
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "in", "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	base := []string{"run", "--brokers", c.ListenAddrs()[0], "--sequencer", "memory", "--server-id", "1", "--worker-id", "1",
		"--input-topic", "in", "--output-topic", "out", "--dlq-topic", "", "--http-addr", "127.0.0.1:0", "--pprof-addr", "127.0.0.1:0"}
	b := startApp(t, append(base, "--web-config-file", cfgFile)...)
	addrRe := regexp.MustCompile(`msg="serving ([^"]*)" addr=(\S+)`)
	var m [][]string
	if !accounting.WaitFor(30*time.Second, func() bool { m = addrRe.FindAllStringSubmatch(b.stderr.String(), -1); return len(m) == 2 }) {
		t.Fatalf("no serving lines in 30s:\n%s", b.stderr.String())
	}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool}}}
	do := func(url, user, pass string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		if user != "" {
			req.SetBasicAuth(user, pass)
		}
		res, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		body, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(body)
	}
	for _, s := range m {
		url := "https://" + s[2] + "/metrics"
		if strings.Contains(s[1], "pprof") {
			url = "https://" + s[2] + "/debug/pprof/"
		}
		if code, _ := do(url, "", ""); code != http.StatusUnauthorized {
			t.Errorf("%s without a password: %d, want 401", url, code)
		}
		if code, _ := do(url, "prometheus", "wrong"); code != http.StatusUnauthorized {
			t.Errorf("%s with a wrong password: %d, want 401", url, code)
		}
		if code, body := do(url, "prometheus", "scrape-pass"); code != http.StatusOK || !strings.Contains(body, "go_") && !strings.Contains(body, "goroutine") {
			t.Errorf("%s with the password: %d %.200s, want 200 and the page", url, code, body)
		}
		res, err := http.Get(strings.Replace(url, "https://", "http://", 1))
		if err == nil {
			body, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode == http.StatusOK || strings.Contains(string(body), "go_") {
				t.Errorf("plain http to %s: %d %.200s, want no page", url, res.StatusCode, body)
			}
		}
	}

	bad := filepath.Join(dir, "bad.yml")
	if err := os.WriteFile(bad, []byte("tls_server_config:\n  cert_file: /nonexistent.pem\n  key_file: /nonexistent.key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, errOut, code := runApp(t, "", nil, append(base, "--web-config-file", bad)...)
	if code != 2 || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, "--web-config-file "+bad) {
		t.Errorf("a web config with missing files: exit %d, %q; want one line naming the flag, exit 2", code, errOut)
	}
}
