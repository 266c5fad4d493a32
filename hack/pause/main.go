// Command pause is the sandbox process of a real node's pods (containerd's sandbox_image): it
// holds the pod's namespaces open, reaps the zombies it inherits as the pod's PID 1, and exits on
// SIGINT or SIGTERM. The fleet builds it into an image and imports it, as nothing is pulled.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for sig := range sigs {
		if sig != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			var status syscall.WaitStatus
			if pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil); pid <= 0 || err != nil {
				break
			}
		}
	}
}
