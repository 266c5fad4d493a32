package quickstart

import (
	"os"
	"os/signal"
	"syscall"
)

// Pause is `regent quickstart pause`, the process of the real node's pod sandboxes and of the
// demo pod: as a pod's PID 1 it holds the namespaces open, reaps the zombies it inherits and
// exits on SIGINT or SIGTERM. It is part of the regent binary so that --real-node needs no
// toolchain to build a pause image: the node imports this binary.
func Pause() {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for sig := range sigs {
		if sig != syscall.SIGCHLD {
			return
		}
		for {
			var status syscall.WaitStatus
			if pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil); pid <= 0 || err != nil {
				break
			}
		}
	}
}
