package benchproc

import (
	"runtime"
	"sync/atomic"
)

// Busy keeps n threads of the calling process spinning until stop is called: a loaded machine
// for a benchmark that must also be measured as one, the same load from run to run instead of
// whatever else the machine was doing. The threads run at normal priority, so they take their
// share of the cores from the measured child and the apiserver alike.
func Busy(n int) (stop func()) {
	done := make(chan struct{})
	for range n {
		go func() {
			runtime.LockOSThread()
			var n uint64
			for {
				select {
				case <-done:
					spins.Add(n)
					return
				default:
				}
				for i := 0; i < 1<<16; i++ {
					n += uint64(i)
				}
			}
		}()
	}
	return func() { close(done) }
}

// spins is what the busy loops computed, kept so the compiler keeps them; it means nothing.
var spins atomic.Uint64
