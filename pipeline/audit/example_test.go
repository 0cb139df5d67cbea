package audit_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"os/signal"

	"github.com/flakestream/flakestream/idgen"
	"github.com/flakestream/flakestream/pipeline/audit"
)

// An auditor that decodes every number of "orders.numbered" and writes an
// audit record for each to "orders.numbered.audit", exactly once, until
// Ctrl-C. (It needs a broker, so this example is compiled, not run.)
func ExampleNew() {
	a, err := audit.New(audit.Brokers("127.0.0.1:9092"), audit.Group(audit.DefaultGroup),
		audit.InputTopics("orders.numbered"), audit.Topic("orders.numbered.audit"),
		audit.Layout(idgen.DefaultLayout()), audit.AllowedServers(1))
	if err != nil {
		log.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := a.Run(ctx); err != nil {
		log.Fatal(err)
	}
	s := a.Stats()
	fmt.Println(s.Audited, s.Anomalies)
}

// The anomalies an audit record can list, in order.
func ExampleAnomalyKinds() {
	fmt.Println(audit.AnomalyKinds())
	// Output:
	// [duplicate renumbered backwards unknown_server unknown_worker future lag invalid]
}
