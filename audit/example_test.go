package audit_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"os/signal"

	"github.com/flakestream/flakestream/audit"
	"github.com/flakestream/flakestream/eos"
	"github.com/flakestream/flakestream/idgen"
)

// An auditor that decodes every number of "orders.numbered" and writes an
// audit record for each to "orders.numbered.audit", exactly once, until
// Ctrl-C. (It needs a broker, so this example is compiled, not run.)
func ExampleNew() {
	s := eos.Config{Brokers: []string{"127.0.0.1:9092"}, Topics: []string{"orders.numbered"}} // Group: audit.DefaultGroup
	a, err := audit.New(s, audit.Topic("orders.numbered.audit"), audit.Layout(idgen.DefaultLayout()), audit.AllowedServers(1))
	if err != nil {
		log.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := a.Run(ctx); err != nil {
		log.Fatal(err)
	}
	st := a.Stats()
	fmt.Println(st.Audited, st.Anomalies)
}

// The anomalies an audit record can list, in order.
func ExampleAnomalyKinds() {
	fmt.Println(audit.AnomalyKinds())
	// Output:
	// [duplicate renumbered backwards unknown_server unknown_worker future lag invalid]
}
