package cli

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/urfave/cli/v2"
)

// Version is flakestream's release.
const Version = "v0.1.0"

// commit is the commit a release was built from, set at link time:
//
//	go build -ldflags "-X github.com/flakestream/flakestream/internal/cli.commit=$(git rev-parse HEAD)"
//
// Left empty, the commit comes from the build information Go stamps into a
// binary built inside a git checkout (vcs.revision). A release build sets
// it because a build outside the checkout (a container's COPY without
// .git, go install of a module) has no vcs stamp.
var commit string

func init() {
	// The one way --version prints, for every App.
	cli.VersionPrinter = func(c *cli.Context) { printVersion(c.App.Writer) }
}

// printVersion writes what --version answers: the release, the commit, and
// the Go and franz-go versions the binary was built with.
func printVersion(w io.Writer) {
	rev, franz := buildInfo()
	fmt.Fprintf(w, "flakestream %s\ncommit:   %s\ngo:       %s\nfranz-go: %s\n", Version, rev, runtime.Version(), franz)
}

// buildInfo is the commit (the -X override, else vcs.revision with
// "-dirty" for a modified tree, else "unknown") and the franz-go module
// version ("unknown" if the binary carries no module information).
func buildInfo() (rev, franz string) {
	rev, franz = commit, "unknown"
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		if rev == "" {
			rev = "unknown"
		}
		return rev, franz
	}
	var vcsRev string
	var dirty bool
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			vcsRev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		rev = vcsRev
		if rev != "" && dirty {
			rev += "-dirty"
		}
	}
	if rev == "" {
		rev = "unknown"
	}
	for _, d := range bi.Deps {
		if d.Path == "github.com/twmb/franz-go" {
			franz = d.Version
			if d.Replace != nil {
				franz = d.Replace.Version
			}
		}
	}
	return rev, franz
}
