package hub

import (
	"fmt"
	"net"
	"net/http"

	"k8s.io/client-go/rest"
)

// watchConnection returns an HTTP client for cfg that opens a connection of its own, for one
// cache's list and watches.
//
// The apiserver ends a watch it cannot hand events to as fast as they come: for a custom resource
// it buffers at most 100 per watcher, then stops the watcher as unresponsive and the client
// watches again from the last version it got. On the one HTTP/2 connection it shared with the
// hub's writes, the replica watch was ended every fraction of a second while the hub created
// replicas (28 times in a 3,000-replica propagation, 3 times on its own connection), so it fell
// ever further behind what the hub wrote; at 150,000 replicas the version it resumed from left the
// apiserver's window of events (410 Expired) and the relist that followed was itself ended before
// it finished, again and again.
func watchConnection(cfg *rest.Config) (*http.Client, error) {
	cfg = rest.CopyConfig(cfg)
	// client-go shares one transport among equal configs; a dialer of its own makes this one
	// unequal to any other.
	cfg.Dial = (&net.Dialer{}).DialContext
	c, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("watch connection: %w", err)
	}
	return c, nil
}
