package cli

import (
	"github.com/urfave/cli/v2"
	"github.com/urfave/cli/v2/altsrc"
)

// The identity group: the server and worker IDs written into every number.
const (
	flagServerID = "server-id"
	flagWorkerID = "worker-id"
)

type identityConfig struct {
	// required: the command refuses a default identity.
	required       bool
	server, worker int64
}

func (id *identityConfig) flags() []cli.Flag {
	usage, def := "", "0"
	if id.required {
		usage, def = " (required: no default, so two deployments never share one by accident)", "none"
	}
	mk := func(name string, dst *int64, what string) cli.Flag {
		return altsrc.NewInt64Flag(&cli.Int64Flag{Name: name, Usage: what + usage, DefaultText: def, EnvVars: []string{envVar(name)}, Destination: dst})
	}
	return []cli.Flag{
		mk(flagServerID, &id.server, "server ID written into every number"),
		mk(flagWorkerID, &id.worker, "worker (business line) ID written into every number"),
	}
}

// check refuses to pick defaults when the identity is required: duplicate
// numbers from two deployments left on a default identity are the classic
// incident of ID generators.
func (id *identityConfig) check(c *cli.Context) error {
	if !id.required {
		return nil
	}
	for _, name := range []string{flagServerID, flagWorkerID} {
		if !c.IsSet(name) {
			return usageErr("--%s is required (or %s, or %s: in --config): every running instance group needs its own", name, envVar(name), name)
		}
	}
	return nil
}
