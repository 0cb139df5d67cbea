package idgen

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// The kinds of Redis a URL names.
const (
	RedisNode     = "node"     // redis:// or rediss://: one server
	RedisCluster  = "cluster"  // redis+cluster:// or rediss+cluster://
	RedisSentinel = "sentinel" // redis+sentinel:// or rediss+sentinel://
)

var (
	// ErrRedisURL is a --redis URL this package cannot use.
	ErrRedisURL = errors.New("idgen: bad redis url")
	// ErrUnknownMaster is a redis+sentinel:// master name that none of
	// the sentinels knows.
	ErrUnknownMaster = errors.New("idgen: unknown sentinel master")
)

// RedisInfo describes the Redis a URL names.
type RedisInfo struct {
	Kind   string   // RedisNode, RedisCluster or RedisSentinel
	Addrs  []string // the server, the cluster seeds, or the sentinels
	Master string   // the Sentinel master name; "" for the other kinds
	TLS    bool
	// Redacted is the URL with every password replaced by "xxxxx", for
	// logs and errors.
	Redacted string
}

// DefaultWaitReplicas is the default of --redis-wait-replicas for this
// kind: 1 for Cluster and Sentinel, whose failovers promote replicas, and 0
// for one node, which has none to promote.
func (i RedisInfo) DefaultWaitReplicas() int {
	if i.Kind == RedisNode {
		return 0
	}
	return 1
}

// ParseRedisURL checks a URL of any form NewRedisClient takes and
// describes it, without building a client.
func ParseRedisURL(rawURL string) (RedisInfo, error) { return parseRedisURL(rawURL) }

// Durability returns the Durability that --redis-wait-replicas and
// --redis-wait-timeout ask for: waitReplicas is "auto" (or ""), meaning
// DefaultWaitReplicas, or a number of replicas from 0; timeout 0 means
// DefaultWaitTimeout.
func (i RedisInfo) Durability(waitReplicas string, timeout time.Duration) (Durability, error) {
	d := Durability{Replicas: i.DefaultWaitReplicas(), Timeout: timeout}
	if waitReplicas != "" && waitReplicas != "auto" {
		n, err := strconv.Atoi(waitReplicas)
		if err != nil || n < 0 {
			return Durability{}, fmt.Errorf("idgen: wait for %q replicas: want auto or a number from 0", waitReplicas)
		}
		d.Replicas = n
	}
	if timeout < 0 {
		return Durability{}, fmt.Errorf("idgen: redis wait timeout %s is negative", timeout)
	}
	if d.Timeout == 0 {
		d.Timeout = DefaultWaitTimeout
	}
	return d, nil
}

// NewRedisClient returns a client for any Redis flakestream can use, named
// by one URL:
//
//	redis://[user:password@]host:port[/db][?options]            one node
//	rediss://...                                                 one node over TLS
//	redis+cluster://[user:password@]h1:p1,h2:p2[?options]       Redis Cluster, by its seed nodes
//	rediss+cluster://...                                         Redis Cluster over TLS
//	redis+sentinel://[user:password@]s1:p1,s2:p2/MASTER[?db=N&sentinel_password=...&options]
//	rediss+sentinel://...                                        Sentinel, TLS to the data nodes and sentinels
//
// The options are go-redis's URL options (dial_timeout, read_timeout,
// pool_size, ...). For Sentinel, user and password are the data nodes'
// credentials; sentinel_username and sentinel_password are the sentinels'.
// It does not connect: the first command does, so a worker can start while
// Redis is down and retry. Every error is one line, with passwords redacted.
func NewRedisClient(rawURL string) (redis.UniversalClient, RedisInfo, error) {
	return NewRedisClientTLS(rawURL, nil)
}

// NewRedisClientTLS is NewRedisClient with the TLS client configuration
// of a rediss URL's connections (to the server, every cluster node, the
// data nodes and the sentinels): its CAs, client certificate and server
// name replace go-redis's defaults (the system pool, no certificate, the
// URL's first host). An empty ServerName means the host of each address
// dialled, so cluster nodes on different hosts are each checked against
// their own name. tlsConfig nil is NewRedisClient; a non-nil one for a URL
// without TLS is an ErrRedisURL.
func NewRedisClientTLS(rawURL string, tlsConfig *tls.Config) (redis.UniversalClient, RedisInfo, error) {
	info, err := parseRedisURL(rawURL)
	if err != nil {
		return nil, info, err
	}
	fail := func(err error) (redis.UniversalClient, RedisInfo, error) {
		msg := strings.TrimPrefix(err.Error(), "redis: ")
		return nil, info, fmt.Errorf("%w %s: %s", ErrRedisURL, info.Redacted, msg)
	}
	if tlsConfig != nil && !info.TLS {
		return fail(errors.New("TLS settings are given but the URL's scheme has no TLS: use rediss://, rediss+cluster:// or rediss+sentinel://"))
	}
	scheme, rest, _ := strings.Cut(rawURL, "://")
	base := "redis"
	if info.TLS {
		base = "rediss"
	}
	switch info.Kind {
	case RedisNode:
		opts, err := redis.ParseURL(rawURL)
		if err != nil {
			return fail(err)
		}
		opts.TLSConfig = withTLS(opts.TLSConfig, tlsConfig)
		return redis.NewClient(opts), info, nil
	case RedisCluster:
		opts, err := clusterOptions(info, base, rest)
		if err != nil {
			return fail(err)
		}
		opts.TLSConfig = withTLS(opts.TLSConfig, tlsConfig)
		return redis.NewClusterClient(opts), info, nil
	case RedisSentinel:
		opts, err := failoverOptions(info, base, rest)
		if err != nil {
			return fail(err)
		}
		opts.TLSConfig = withTLS(opts.TLSConfig, tlsConfig)
		c := redis.NewFailoverClient(opts)
		c.AddHook(sentinelErrors{master: info.Master, sentinels: strings.Join(info.Addrs, ",")})
		return c, info, nil
	}
	return fail(fmt.Errorf("unknown scheme %q", scheme))
}

// withTLS is the TLS configuration of the connections: go-redis's from
// the URL (parsed) unless the caller gave its own (given), which keeps the
// URL's skip_verify.
func withTLS(parsed, given *tls.Config) *tls.Config {
	if given == nil || parsed == nil {
		return parsed
	}
	cfg := given.Clone()
	cfg.InsecureSkipVerify = cfg.InsecureSkipVerify || parsed.InsecureSkipVerify
	if cfg.MinVersion == 0 {
		cfg.MinVersion = tls.VersionTLS12
	}
	return cfg
}

// clusterOptions turns a redis+cluster URL (rest is what follows "://")
// into go-redis's cluster URL form: the seeds as addr options.
func clusterOptions(info RedisInfo, base, rest string) (*redis.ClusterOptions, error) {
	userinfo, _, path, query := splitAuthority(rest)
	if path != "" && path != "/" {
		return nil, fmt.Errorf("a cluster has no database: drop %q", path)
	}
	q, err := url.ParseQuery(query)
	if err != nil {
		return nil, err
	}
	for _, a := range info.Addrs[1:] {
		q.Add("addr", a)
	}
	return redis.ParseClusterURL(base + "://" + userinfo + info.Addrs[0] + "?" + q.Encode())
}

// failoverOptions turns a redis+sentinel URL (rest is what follows "://")
// into go-redis's failover options: the master name from the path, the
// data nodes' credentials from user:password@, the sentinels' from the
// sentinel_username and sentinel_password options.
func failoverOptions(info RedisInfo, base, rest string) (*redis.FailoverOptions, error) {
	userinfo, _, _, query := splitAuthority(rest)
	q, err := url.ParseQuery(query)
	if err != nil {
		return nil, err
	}
	for _, k := range []string{"master_name", "username", "password", "addr"} {
		if q.Has(k) {
			return nil, fmt.Errorf("option %q is not taken here: the master name is the path, the data nodes' credentials the user:password@, the sentinels the host list", k)
		}
	}
	sentUser, sentPass := q.Get("sentinel_username"), q.Get("sentinel_password")
	q.Del("sentinel_username")
	q.Del("sentinel_password")
	q.Set("master_name", info.Master)
	for _, a := range info.Addrs[1:] {
		q.Add("addr", a)
	}
	opts, err := redis.ParseFailoverURL(base + "://" + info.Addrs[0] + "?" + q.Encode())
	if err != nil {
		return nil, err
	}
	if userinfo != "" {
		ui, err := url.Parse(base + "://" + userinfo + "x")
		if err != nil || ui.User == nil {
			return nil, errors.New("cannot read user:password@")
		}
		opts.Username = ui.User.Username()
		opts.Password, _ = ui.User.Password()
	}
	opts.SentinelUsername, opts.SentinelPassword = sentUser, sentPass
	// A failover takes Sentinel a few seconds; keep asking the
	// sentinels rather than failing the first command after it.
	if opts.MaxRetries == 0 {
		opts.MaxRetries = 3
	}
	if opts.MaxRetryBackoff == 0 {
		opts.MaxRetryBackoff = 500 * time.Millisecond
	}
	return opts, nil
}

// sentinelErrors makes the errors of asking the sentinels for the master
// one line that says what is wrong: go-redis joins one "redis: nil" per
// sentinel when none knows the master name.
type sentinelErrors struct{ master, sentinels string }

func (h sentinelErrors) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := next(ctx, network, addr)
		if err == nil {
			return conn, nil
		}
		if errors.Is(err, redis.Nil) {
			return nil, fmt.Errorf("%w: the sentinels %s know no master named %q", ErrUnknownMaster, h.sentinels, h.master)
		}
		return nil, fmt.Errorf("redis sentinels %s, master %q: %s", h.sentinels, h.master, strings.ReplaceAll(err.Error(), "\n", "; "))
	}
}

func (sentinelErrors) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (sentinelErrors) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// splitAuthority splits what follows "scheme://" into the user info (with
// its "@"), the host list, the path and the query.
func splitAuthority(rest string) (userinfo, hosts, path, query string) {
	rest, query, _ = strings.Cut(rest, "?")
	hosts, path = rest, ""
	if i := strings.IndexByte(rest, '/'); i >= 0 {
		hosts, path = rest[:i], rest[i:]
	}
	if i := strings.LastIndexByte(hosts, '@'); i >= 0 {
		userinfo, hosts = hosts[:i+1], hosts[i+1:]
	}
	return userinfo, hosts, path, query
}

// parseRedisURL checks the shape of a URL and fills in its RedisInfo.
func parseRedisURL(rawURL string) (RedisInfo, error) {
	info := RedisInfo{Redacted: RedactURL(rawURL)}
	bad := func(format string, args ...any) (RedisInfo, error) {
		return info, fmt.Errorf("%w %s: %s", ErrRedisURL, info.Redacted, fmt.Sprintf(format, args...))
	}
	scheme, rest, ok := strings.Cut(rawURL, "://")
	if !ok {
		return bad("want redis://, rediss://, redis+cluster://, rediss+cluster://, redis+sentinel:// or rediss+sentinel://")
	}
	switch scheme {
	case "redis", "rediss":
		info.Kind = RedisNode
	case "redis+cluster", "rediss+cluster":
		info.Kind = RedisCluster
	case "redis+sentinel", "rediss+sentinel":
		info.Kind = RedisSentinel
	default:
		return bad("scheme %q: want redis, rediss, redis+cluster, rediss+cluster, redis+sentinel or rediss+sentinel", scheme)
	}
	info.TLS = strings.HasPrefix(scheme, "rediss")
	_, hosts, path, _ := splitAuthority(rest)
	if hosts == "" {
		return bad("no host: want host:port")
	}
	for _, h := range strings.Split(hosts, ",") {
		host, port, err := net.SplitHostPort(h)
		if err != nil && info.Kind == RedisNode {
			// redis://host means port 6379, as go-redis reads it.
			host, port, err = h, "6379", nil
		}
		if err != nil {
			return bad("host %q: want host:port", h)
		}
		if p, err := strconv.Atoi(port); host == "" || err != nil || p < 1 || p > 65535 {
			return bad("host %q: want host:port with a port from 1 to 65535", h)
		}
		info.Addrs = append(info.Addrs, net.JoinHostPort(host, port))
	}
	if info.Kind == RedisNode && len(info.Addrs) > 1 {
		return bad("%d hosts for one node: for a cluster use redis+cluster://, for Sentinel redis+sentinel://", len(info.Addrs))
	}
	if info.Kind == RedisSentinel {
		info.Master = strings.Trim(path, "/")
		if info.Master == "" || strings.Contains(info.Master, "/") {
			return bad("want the master name as the path: redis+sentinel://s1:26379,s2:26379/MASTER")
		}
	}
	return info, nil
}

// RedactURL hides every password in a Redis URL of any of the forms
// NewRedisClient takes, for error messages and logs.
func RedactURL(u string) string {
	scheme, rest, ok := strings.Cut(u, "://")
	if !ok {
		return u
	}
	userinfo, hosts, path, query := splitAuthority(rest)
	if user, _, hasPass := strings.Cut(strings.TrimSuffix(userinfo, "@"), ":"); hasPass {
		userinfo = user + ":xxxxx@"
	}
	if query != "" {
		parts := strings.Split(query, "&")
		for i, p := range parts {
			k, _, _ := strings.Cut(p, "=")
			if strings.Contains(strings.ToLower(k), "password") {
				parts[i] = k + "=xxxxx"
			}
		}
		query = "?" + strings.Join(parts, "&")
	}
	return scheme + "://" + userinfo + hosts + path + query
}
