package lifecycle

import (
	"context"
	"sync"

	"regent.dev/regent/policyserver"
	"regent.dev/regent/reports/background"
)

// runBackgroundScan runs the background scan while this replica leads, in this process, through
// the server's audit path: the leader serves every revision the webhooks call, like every
// replica, so it evaluates without a network hop, and one scan per policy server runs at a time
// without a lock of its own. wait returns once the scan has stopped (when lead's ctx ends).
func runBackgroundScan(ctx context.Context, opts Options, server *policyserver.Server) (wait func()) {
	if opts.Background == nil {
		return func() {}
	}
	bo := *opts.Background
	bo.Config, bo.Namespace, bo.PolicyServer = opts.Config, opts.Namespace, opts.PolicyServer
	bo.Registerer, bo.Logger = server.Registerer(), opts.Logger
	s, err := background.New(bo, server)
	if err != nil {
		opts.Logger.Error(err, "background scan not started; admission keeps serving")
		return func() {}
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := s.Run(ctx); err != nil {
			opts.Logger.Error(err, "background scan stopped; admission keeps serving")
		}
	})
	return wg.Wait
}
