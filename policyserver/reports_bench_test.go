package policyserver

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"regent.dev/regent/api/scheme"
	"regent.dev/regent/fleet/fleettest"
	"regent.dev/regent/reports/admission"
)

// BenchmarkAdmissionReports_OnVsOff measures the admission latency of a monitor-mode policy
// with report writing off and on, in the same run and against the same apiserver, in the order
// off, on, on, off so drift in a shared machine's load shows as a difference between the two
// runs of one setting. Every request is an UPDATE, with a request UID of its own, of one of 200
// real ConfigMaps (half of them denied), so the server with reports writes real reports, one per
// ConfigMap per second at most. Reported: p50 and p99 in microseconds, and for the runs with
// reports the writes and drops of the queue.
func BenchmarkAdmissionReports_OnVsOff(b *testing.B) {
	hub := fleettest.Hub(b)
	c, err := client.New(hub.Config, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		b.Fatal(err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "bench-"}}
	if err := c.Create(b.Context(), ns); err != nil {
		b.Fatal(err)
	}
	const objects = 200
	bodies := make([][]byte, objects)
	for i := range objects {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: fmt.Sprintf("cm-%d", i)}}
		if i%2 == 0 {
			cm.Labels = map[string]string{"team": "a"}
		}
		if err := c.Create(b.Context(), cm); err != nil {
			b.Fatal(err)
		}
		// A fixed-width placeholder uid, replaced per request.
		req := admissionRequestFor(b, "00000000-0000-4000-8000-000000000000", "UPDATE", cm)
		bodies[i] = []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":` + string(req) + `}`)
	}
	off := newTeamServer(b, nil)
	on := &reportsServer{testServer: newTeamServer(b, &admission.Options{Client: c})}
	var seq atomic.Int64
	for _, run := range []struct {
		name string
		ts   *testServer
	}{{"off", off}, {"on", on.testServer}, {"on-again", on.testServer}, {"off-again", off}} {
		run.ts.client.Transport.(*http.Transport).MaxIdleConnsPerHost = 64
		b.Run(run.name, func(b *testing.B) {
			var mu sync.Mutex
			var all []time.Duration
			written, dropped := on.metric(b, "regent_admission_reports_writes_total", "outcome", "written"), on.metric(b, "regent_admission_reports_dropped_total")
			b.SetParallelism(4)
			b.RunParallel(func(pb *testing.PB) {
				var mine []time.Duration
				for pb.Next() {
					n := seq.Add(1)
					body := bytes.Replace(bodies[n%objects], []byte("00000000-0000-4000-8000-000000000000"),
						fmt.Appendf(nil, "%08x-0000-4000-8000-000000000000", n), 1)
					start := time.Now()
					resp, err := run.ts.client.Post(run.ts.url+"/validate/monitor-team", "application/json", bytes.NewReader(body))
					if err != nil {
						b.Error(err)
						return
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					mine = append(mine, time.Since(start))
					if resp.StatusCode != http.StatusOK {
						b.Errorf("status %d", resp.StatusCode)
						return
					}
				}
				mu.Lock()
				all = append(all, mine...)
				mu.Unlock()
			})
			slices.Sort(all)
			if len(all) == 0 {
				return
			}
			b.ReportMetric(float64(all[len(all)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(all[len(all)*99/100].Microseconds()), "p99-µs")
			if run.ts == on.testServer {
				// Writes finish up to a Delay after the answers: this counts the run's own and
				// some of the run before it.
				b.ReportMetric(on.metric(b, "regent_admission_reports_writes_total", "outcome", "written")-written, "reports-written")
				b.ReportMetric(on.metric(b, "regent_admission_reports_dropped_total")-dropped, "answers-dropped")
			}
		})
	}
}
