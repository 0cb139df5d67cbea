package cli

import (
	"strings"
	"testing"

	"github.com/flakestream/flakestream/internal/testenv"
)

// A bad --redis URL, a wrong master name and a cluster seed that is not a
// cluster node: each one line on stderr, no password, no retrying for 30s.
func TestGenBadRedisIsOneLine(t *testing.T) {
	single := testenv.RedisServer(t)
	s := testenv.NewRedisSentinels(t)
	wrongMaster := strings.TrimSuffix(s.URL, s.Master) + "nosuchmaster"
	for _, c := range []struct {
		url, want string
		code      int
	}{
		{"redis+cluster://:secret@127.0.0.1", `flakestream: idgen: bad redis url redis+cluster://:xxxxx@127.0.0.1: host "127.0.0.1": want host:port`, 2},
		{"redis+sentinel://:secret@127.0.0.1:26379", "flakestream: idgen: bad redis url redis+sentinel://:xxxxx@127.0.0.1:26379: want the master name as the path: redis+sentinel://s1:26379,s2:26379/MASTER", 2},
		{"memcached://127.0.0.1:11211", `flakestream: idgen: bad redis url memcached://127.0.0.1:11211: scheme "memcached"`, 2},
		{"redis+cluster://" + single.Addr, "redis+cluster:// names a server that is not a Redis Cluster node", 1},
		{wrongMaster, `know no master named "nosuchmaster"`, 1},
	} {
		t.Run(c.url, func(t *testing.T) {
			_, errOut, code := runApp(t, "", nil, "gen", "--redis", c.url)
			if code != c.code || !strings.Contains(errOut, c.want) || strings.Count(errOut, "\n") != 1 || strings.Contains(errOut, "secret") {
				t.Fatalf("exit %d, stderr %q; want %d and one line with %q", code, errOut, c.code, c.want)
			}
			// gen prints a line for every retry: a configuration error
			// has none.
			if strings.Contains(errOut, "retrying") {
				t.Fatalf("stderr %q: a configuration error must not be retried", errOut)
			}
		})
	}
}
