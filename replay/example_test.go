package replay_test

import (
	"context"
	"fmt"
	"log"

	"github.com/flakestream/flakestream/eos"
	"github.com/flakestream/flakestream/idgen"
	"github.com/flakestream/flakestream/pipeline"
	"github.com/flakestream/flakestream/replay"
	"github.com/redis/go-redis/v9"
)

// A bound is a partition's start or end, a time, or explicit offsets.
func ExampleParseBound() {
	for _, s := range []string{"start", "2026-11-30T08:00:00Z", "0:1200,3:900"} {
		b, err := replay.ParseBound(s)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(b)
	}
	// Output:
	// start
	// 2026-11-30T08:00:00Z
	// 0:1200,3:900
}

// Replay one hour of "orders" into "orders.numbered" again, exactly once;
// run again with the same arguments, it resumes. (It needs a broker and
// Redis, so this example is compiled, not run.)
func ExampleRun() {
	rc := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer rc.Close()
	seq, err := idgen.NewRedisSequencer(idgen.RedisSettings{Client: rc})
	if err != nil {
		log.Fatal(err)
	}
	gen, err := idgen.New(idgen.Settings{ServerID: 1, WorkerID: 2, Sequencer: seq})
	if err != nil {
		log.Fatal(err)
	}
	from, _ := replay.ParseBound("2026-11-30T08:00:00Z")
	to, _ := replay.ParseBound("2026-11-30T09:00:00Z")
	ranges, err := replay.Run(context.Background(), replay.Config{
		Loop:  eos.Config{Brokers: []string{"127.0.0.1:9092"}},
		Input: "orders", Output: "orders.numbered",
		From: from, To: to, Redis: rc,
		Worker: []pipeline.Opt{pipeline.Numbers(gen)},
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(ranges) // partition -> the offsets [from, to) replayed
}
