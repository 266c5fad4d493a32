package capabilities

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
)

// lookupHost answers net v1/dns_lookup_host: the payload is a host name as a JSON string, the
// answer {"ips": [...]}, the addresses the server's resolver finds (the guest has no network).
func lookupHost(ctx context.Context, payload []byte) ([]byte, error) {
	var host string
	if err := json.Unmarshal(payload, &host); err != nil {
		return nil, fmt.Errorf("net v1/dns_lookup_host: payload must be a host name as a JSON string: %w", err)
	}
	ips, err := net.DefaultResolver.LookupHost(ctx, host)
	if err != nil {
		return nil, fmt.Errorf("net v1/dns_lookup_host: %w", err)
	}
	return json.Marshal(struct {
		IPs []string `json:"ips"`
	}{ips})
}
