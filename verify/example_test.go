package verify_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/flakestream/flakestream/codec"
	"github.com/flakestream/flakestream/verify"
)

// A ledger is fed the input range and every copy found; its report says
// what became of each order.
func ExampleLedger() {
	l := verify.NewLedger([]verify.Range{{Topic: "orders", Partition: 0, From: 0, To: 3}})
	for off := int64(0); off < 3; off++ {
		l.Input(verify.Coord{Topic: "orders", Partition: 0, Offset: off}, false)
	}
	at := func(off int64) verify.Coord { return verify.Coord{Topic: "orders.numbered", Partition: 0, Offset: off} }
	src := func(off int64) verify.Coord { return verify.Coord{Topic: "orders", Partition: 0, Offset: off} }
	l.Output(src(0), at(0), 1001)
	l.Output(src(1), at(1), 1002)
	l.Output(src(1), at(2), 1003) // the same order again, with another number
	rep := l.Report()
	fmt.Println(rep.Input, rep.Numbered, rep.Lost, rep.Renumbered, rep.Exact)
	fmt.Println(rep.Faults.Lost[0].Source, rep.Faults.Renumbered[0].Numbers)
	// Output:
	// 3 2 1 1 false
	// orders/0/2 [1002 1003]
}

// Run reconciles a range on a cluster, as `flakestream verify` does. (It
// needs a broker, so this example is compiled, not run.)
func ExampleRun() {
	c, err := codec.New(codec.Config{}) // the worker's number field and rules
	if err != nil {
		log.Fatal(err)
	}
	res, err := verify.Run(context.Background(), verify.Config{
		Brokers: []string{"127.0.0.1:9092"},
		Inputs:  []string{"orders"},
		Output:  "orders.numbered",
		DLQ:     "orders.dlq",
		Format:  codec.JSONFormat{C: c},
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Report)
	if !res.Exact {
		os.Exit(1)
	}
}
