package replay

import (
	"context"
	"slices"
)

// Plan is what a replay would do, from Resolve: it changes nothing.
type Plan struct {
	// ID and Group name the replay.
	ID, Group string
	// Partitions are the partitions replayed, in order, each with its
	// range and how much of it an earlier run of the replay committed.
	Partitions []PartitionPlan
	// Left are the partitions of the input that are not replayed (the
	// bounds list others, and AllPartitions is off).
	Left []int32
	// Stored: the ranges are the ones an earlier run of this replay kept
	// in Redis, so a run now stops there, not at today's end.
	Stored bool
}

// PartitionPlan is one partition of a Plan.
type PartitionPlan struct {
	Partition int32
	Range
	// Done is how many offsets of the range an earlier run committed.
	Done int64
}

// Offsets is the number of offsets of the range. Every one is a record
// unless the input holds transaction markers or was compacted within it;
// then the replay numbers fewer records than this.
func (pp PartitionPlan) Offsets() int64 { return pp.To - pp.From }

// Total is the offsets of every replayed partition, and how many of them
// are done.
func (p Plan) Total() (offsets, done int64) {
	for _, pp := range p.Partitions {
		offsets += pp.Offsets()
		done += pp.Done
	}
	return offsets, done
}

// Resolve resolves a replay's bounds as Run would and reports the plan,
// without storing the ranges, committing offsets or producing anything:
// the dry run. A replay that has run before reports the ranges its first
// run kept and what it has committed since.
func Resolve(ctx context.Context, rc Config) (Plan, error) {
	adm, edges, err := openInput(ctx, &rc)
	plan := Plan{ID: rc.ID, Group: Group(rc.ID)}
	if err != nil {
		return plan, err
	}
	defer adm.Close()
	kept, err := storedRanges(ctx, rc)
	if err != nil {
		return plan, err
	}
	plan.Stored = kept != nil
	ranges, err := resolveRanges(ctx, adm, edges, rc, false)
	if err != nil {
		return plan, err
	}
	committed, err := groupOffsets(ctx, adm, plan.Group, rc.Input)
	if err != nil {
		return plan, err
	}
	for p := range edges.starts[rc.Input] {
		r, ok := ranges[p]
		if !ok {
			plan.Left = append(plan.Left, p)
			continue
		}
		pp := PartitionPlan{Partition: p, Range: r}
		if o, ok := committed[p]; ok {
			pp.Done = min(max(o, r.From), r.To) - r.From
		}
		plan.Partitions = append(plan.Partitions, pp)
	}
	slices.Sort(plan.Left)
	slices.SortFunc(plan.Partitions, func(a, b PartitionPlan) int { return int(a.Partition - b.Partition) })
	return plan, nil
}
