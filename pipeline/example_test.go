package pipeline_test

import (
	"context"
	"log"
	"os"
	"os/signal"

	"github.com/flakestream/flakestream/eos"
	"github.com/flakestream/flakestream/idgen"
	"github.com/flakestream/flakestream/pipeline"
	"github.com/redis/go-redis/v9"
)

// A worker that numbers the orders of topic "orders" into
// "orders.numbered", exactly once, with numbers reserved from Redis, until
// Ctrl-C. (It needs a broker and Redis, so this example is compiled, not
// run.)
func ExampleNewWorker() {
	rc := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer rc.Close()
	seq, err := idgen.NewRedisSequencer(idgen.RedisSettings{Client: rc})
	if err != nil {
		log.Fatal(err)
	}
	gen, err := idgen.New(idgen.Settings{ServerID: 1, WorkerID: 1, Sequencer: seq})
	if err != nil {
		log.Fatal(err)
	}
	s := eos.Config{Brokers: []string{"127.0.0.1:9092"}, Topics: []string{"orders"}, Group: "flakestream"}
	w, err := pipeline.NewWorker(s, pipeline.OutputTopic("orders.numbered"), pipeline.Numbers(gen))
	if err != nil {
		log.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := w.Run(ctx); err != nil { // a clean stop on Ctrl-C is nil
		log.Fatal(err)
	}
}
