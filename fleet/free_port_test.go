package fleet

import (
	"net"
	"strconv"
	"testing"
)

// The address FreeAddr gives can be listened on, and its port is not one the kernel would hand to
// an outgoing connection meanwhile.
func TestFreeAddr_ListensBelowTheEphemeralRange(t *testing.T) {
	low := ephemeralLow()
	for range 20 {
		addr, err := FreeAddr()
		if err != nil {
			t.Fatal(err)
		}
		_, port, _ := net.SplitHostPort(addr)
		n, _ := strconv.Atoi(port)
		if low > freePortMin+1000 && (n < freePortMin || n >= low) {
			t.Errorf("port %d is outside [%d, %d)", n, freePortMin, low)
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("listen on %s: %v", addr, err)
		}
		ln.Close()
	}
}
