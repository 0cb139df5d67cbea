package cli

import (
	"errors"
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"
)

// nearest is the name in names closest to s by edit distance, or "" when
// none is close enough to be what the user meant: at most a third of the
// longer name's letters differ (and at least 2 may, so that a short name
// with one typo is still found).
func nearest(s string, names []string) string {
	best, bestD := "", -1
	for _, n := range names {
		d := editDistance(s, n)
		if limit := max(2, max(len(s), len(n))/3); d > limit {
			continue
		}
		if bestD < 0 || d < bestD {
			best, bestD = n, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b, in bytes
// (names are ASCII).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// didYouMean is " Did you mean 'x'?" for the nearest of names, or "".
func didYouMean(s string, names []string, prefix string) string {
	if n := nearest(s, names); n != "" {
		return fmt.Sprintf(" Did you mean '%s%s'?", prefix, n)
	}
	return ""
}

// unknownCommand is the root action: no arguments show the help; a first
// argument that is no command is a usage error naming the nearest one.
func unknownCommand(c *cli.Context) error {
	if c.NArg() == 0 {
		return cli.ShowAppHelp(c)
	}
	var names []string
	for _, cmd := range c.App.Commands {
		if !cmd.Hidden {
			names = append(names, cmd.Names()...)
		}
	}
	name := c.Args().First()
	return usageErr("'%s' is not a flakestream command.%s (see --help)", name, didYouMean(name, names, ""))
}

// flagNames are the long names of flags.
func flagNames(flags []cli.Flag) []string {
	var names []string
	for _, f := range flags {
		names = append(names, f.Names()...)
	}
	return names
}

// undefinedFlag is the name in the flag package's "flag provided but not
// defined: -name" error, or "".
func undefinedFlag(err error) string {
	const prefix = "flag provided but not defined: -"
	for ; err != nil; err = errors.Unwrap(err) {
		if s, ok := strings.CutPrefix(err.Error(), prefix); ok {
			return strings.TrimLeft(s, "-")
		}
	}
	return ""
}
