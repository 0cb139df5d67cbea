package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/flakestream/flakestream/idgen"
	"github.com/redis/go-redis/v9"
	"github.com/urfave/cli/v2"
	"github.com/urfave/cli/v2/altsrc"
)

// Every flag can also be set as FLAKESTREAM_<FLAG> in the environment and as
// a key of the YAML file given by --config; altsrc resolves the precedence
// flag > environment > file > default.

func envVars(name string) []string {
	return []string{"FLAKESTREAM_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))}
}

func stringFlag(name, value, usage string) cli.Flag {
	return altsrc.NewStringFlag(&cli.StringFlag{Name: name, Value: value, Usage: usage, EnvVars: envVars(name)})
}

func stringSliceFlag(name string, value []string, usage string) cli.Flag {
	f := &cli.StringSliceFlag{Name: name, Usage: usage, EnvVars: envVars(name)}
	if value != nil {
		f.Value = cli.NewStringSlice(value...)
	}
	return altsrc.NewStringSliceFlag(f)
}

func durationFlag(name string, value time.Duration, usage string) cli.Flag {
	return altsrc.NewDurationFlag(&cli.DurationFlag{Name: name, Value: value, Usage: usage, EnvVars: envVars(name)})
}

func boolFlag(name string, usage string) cli.Flag {
	return altsrc.NewBoolFlag(&cli.BoolFlag{Name: name, Usage: usage, EnvVars: envVars(name)})
}

func intFlag(name string, value int, usage string) cli.Flag {
	return altsrc.NewIntFlag(&cli.IntFlag{Name: name, Value: value, Usage: usage, EnvVars: envVars(name)})
}

func int64Flag(name string, value int64, usage string) cli.Flag {
	return altsrc.NewInt64Flag(&cli.Int64Flag{Name: name, Value: value, Usage: usage, EnvVars: envVars(name)})
}

// configured adds --config to a command and loads the YAML file it names
// before the action runs, so every altsrc flag can come from the file.
func configured(cmd *cli.Command) *cli.Command {
	cmd.Flags = append([]cli.Flag{&cli.StringFlag{
		Name:    "config",
		Usage:   "YAML `FILE` whose keys are flag names (flags and FLAKESTREAM_* variables override it)",
		EnvVars: envVars("config"),
	}}, cmd.Flags...)
	cmd.Before = altsrc.InitInputSourceWithContext(cmd.Flags, func(c *cli.Context) (altsrc.InputSourceContext, error) {
		src, err := altsrc.NewYamlSourceFromFlagFunc("config")(c)
		if err != nil {
			return nil, fmt.Errorf("config file %s: %w", c.String("config"), err)
		}
		return src, nil
	})
	cmd.OnUsageError = usageError
	return cmd
}

// usageError keeps a bad flag to one line instead of the whole help text.
func usageError(_ *cli.Context, err error, _ bool) error {
	return &exitError{code: 2, err: fmt.Errorf("%w (see --help)", err)}
}

func layoutFlags() []cli.Flag {
	d := idgen.DefaultLayout()
	return []cli.Flag{
		stringFlag("epoch", d.Epoch.Format(time.RFC3339), "the layout's epoch, RFC 3339 or Unix milliseconds"),
		intFlag("time-bits", d.TimeBits, "width of the time field (milliseconds since the epoch)"),
		intFlag("server-bits", d.ServerBits, "width of the server field (may be 0)"),
		intFlag("worker-bits", d.WorkerBits, "width of the worker (business line) field (may be 0)"),
		intFlag("sequence-bits", d.SequenceBits, "width of the per-millisecond sequence"),
	}
}

// layoutFrom builds and validates the layout the flags describe.
func layoutFrom(c *cli.Context) (idgen.Layout, error) {
	epoch, err := parseEpoch(c.String("epoch"))
	if err != nil {
		return idgen.Layout{}, err
	}
	l, err := idgen.NewLayout(epoch, c.Int("time-bits"), c.Int("server-bits"), c.Int("worker-bits"), c.Int("sequence-bits"))
	if err != nil {
		return idgen.Layout{}, fmt.Errorf("layout: %w", err)
	}
	return l, nil
}

func parseEpoch(s string) (time.Time, error) {
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil {
		return time.UnixMilli(ms), nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("--epoch %q is neither RFC 3339 (2021-11-12T00:00:00+08:00) nor Unix milliseconds", s)
	}
	return t, nil
}

func identityFlags(required bool) []cli.Flag {
	usage, def := "", "0"
	if required {
		usage, def = " (required: no default, so two deployments never share one by accident)", "none"
	}
	mk := func(name, what string) cli.Flag {
		return altsrc.NewInt64Flag(&cli.Int64Flag{Name: name, Usage: what + usage, DefaultText: def, EnvVars: envVars(name)})
	}
	return []cli.Flag{
		mk("server-id", "server ID written into every number"),
		mk("worker-id", "worker (business line) ID written into every number"),
	}
}

// identityFrom returns the server and worker IDs, refusing to pick defaults
// when required: duplicate numbers from two deployments left on a default
// identity are the classic incident of ID generators.
func identityFrom(c *cli.Context, required bool) (server, worker int64, err error) {
	if required {
		for _, name := range []string{"server-id", "worker-id"} {
			if !c.IsSet(name) {
				return 0, 0, &exitError{code: 2, err: fmt.Errorf("--%s is required (or FLAKESTREAM_%s, or %s: in --config): every running instance group needs its own", name, strings.ToUpper(strings.ReplaceAll(name, "-", "_")), name)}
			}
		}
	}
	return c.Int64("server-id"), c.Int64("worker-id"), nil
}

func redisFlags() []cli.Flag {
	return []cli.Flag{
		stringFlag("redis", "redis://127.0.0.1:6379/0", "Redis `URL`: redis://[user:password@]host:port/db for one node; redis+cluster://[user:password@]h1:p1,h2:p2 for Redis Cluster; redis+sentinel://[user:password@]s1:p1,s2:p2/MASTER[?db=N&sentinel_password=...] for Sentinel; rediss... for TLS"),
		stringFlag("redis-prefix", idgen.DefaultPrefix, "prefix of every Redis key flakestream writes"),
		stringFlag("redis-wait-replicas", "auto", "before using a reservation or key claim, WAIT for this many replicas (or all the primary has, if fewer): auto is 1 for cluster and sentinel URLs, 0 for one node"),
		durationFlag("redis-wait-timeout", idgen.DefaultWaitTimeout, "how long one WAIT for replicas may take; a reservation not acknowledged in time is dropped and asked again"),
	}
}

// redisFrom returns the client --redis names and the durability the
// --redis-wait-* flags ask for.
func redisFrom(c *cli.Context) (redis.UniversalClient, idgen.Durability, error) {
	d, err := durabilityFrom(c)
	if err != nil {
		return nil, d, err
	}
	rc, _, err := idgen.NewRedisClient(c.String("redis"))
	if err != nil {
		return nil, d, &exitError{code: 2, err: err}
	}
	// go-redis logs every failed dial and sentinel lookup on stderr, many
	// lines a second during an outage; flakestream reports the error that
	// matters itself, in one line.
	redis.SetLogger(quietRedis{})
	return rc, d, nil
}

type quietRedis struct{}

func (quietRedis) Printf(context.Context, string, ...any) {}

func durabilityFrom(c *cli.Context) (idgen.Durability, error) {
	info, err := idgen.ParseRedisURL(c.String("redis"))
	if err == nil {
		var d idgen.Durability
		if d, err = info.Durability(c.String("redis-wait-replicas"), c.Duration("redis-wait-timeout")); err == nil {
			return d, nil
		}
	}
	return idgen.Durability{}, &exitError{code: 2, err: err}
}

// generatorFrom builds the generator the flags describe. kind is "redis" or
// "memory". rc is the Redis client to use, or nil for one of its own (which
// close releases); a command that also needs Redis for something else
// passes its client, so there is one connection pool. wrap, if not nil,
// wraps the sequencer (to time it).
func generatorFrom(c *cli.Context, kind string, server, worker int64, rc redis.UniversalClient, wrap func(idgen.Sequencer) idgen.Sequencer) (g *idgen.Generator, close func(), err error) {
	l, err := layoutFrom(c)
	if err != nil {
		return nil, nil, err
	}
	var seq idgen.Sequencer
	close = func() {}
	switch kind {
	case "memory":
		seq = idgen.NewMemorySequencer(nil)
	case "redis":
		d, err := durabilityFrom(c)
		if err != nil {
			return nil, nil, err
		}
		if rc == nil {
			client, _, err := redisFrom(c)
			if err != nil {
				return nil, nil, err
			}
			rc, close = client, func() { client.Close() }
		}
		if seq, err = idgen.NewRedisSequencer(idgen.RedisSettings{Client: rc, Prefix: c.String("redis-prefix"), Durability: d}); err != nil {
			close()
			return nil, nil, err
		}
	default:
		return nil, nil, &exitError{code: 2, err: fmt.Errorf("--sequencer %q: want redis or memory", kind)}
	}
	if wrap != nil {
		seq = wrap(seq)
	}
	g, err = idgen.New(idgen.Settings{Layout: l, ServerID: server, WorkerID: worker, Sequencer: seq})
	if err != nil {
		close()
		return nil, nil, err
	}
	return g, close, nil
}

// exitError carries an exit code to main, the only place that exits.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }
