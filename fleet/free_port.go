package fleet

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
)

// FreePort is a port nothing listens on at host now, for a server started (and perhaps restarted)
// there. It lies below the kernel's ephemeral range where it can: a port from that range, once
// released, is any outgoing connection's to take, and a policy-server replica started on one
// failed with "address already in use" while a fleet opened connections around it.
func FreePort(host string) (string, error) {
	if low := ephemeralLow(); low > freePortMin+1000 {
		for range 100 {
			port := strconv.Itoa(freePortMin + rand.IntN(low-freePortMin))
			if ln, err := net.Listen("tcp", net.JoinHostPort(host, port)); err == nil {
				ln.Close()
				return port, nil
			}
		}
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return "", fmt.Errorf("no free port on %s: %w", host, err)
	}
	defer ln.Close()
	_, port, err := net.SplitHostPort(ln.Addr().String())
	return port, err
}

// FreeAddr is FreePort on loopback, as host:port.
func FreeAddr() (string, error) {
	port, err := FreePort("127.0.0.1")
	if err != nil {
		return "", err
	}
	return net.JoinHostPort("127.0.0.1", port), nil
}

// freePortMin keeps FreePort above the ports services conventionally take.
const freePortMin = 10000

// ephemeralLow is the first port the kernel hands to outgoing connections (Linux's default when
// it cannot be read).
func ephemeralLow() int {
	const linuxDefault = 32768
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return linuxDefault
	}
	fields := strings.Fields(string(b))
	if len(fields) == 0 {
		return linuxDefault
	}
	if n, err := strconv.Atoi(fields[0]); err == nil {
		return n
	}
	return linuxDefault
}
