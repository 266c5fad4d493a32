package chaos

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	admissionv1 "k8s.io/api/admission/v1"

	"regent.dev/regent/loadgen"
)

// readyBalancer stands in for the webhook's Service: it sends each admission to the next replica
// whose /readyz answers 200 (the Service's endpoints are the ready pods), and a replica that
// refuses the connection is skipped for the next one (its endpoint would be gone). Every request
// takes a new connection, so a connection cut before the answer means the request was in flight
// on a replica at the moment it was killed.
type readyBalancer struct {
	client *http.Client
	addrs  []string
	ready  []atomic.Bool
	next   atomic.Uint64
}

func newReadyBalancer(caPEM []byte, addrs []string) (*readyBalancer, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, errors.New("no CA certificate in the policy server's CA file")
	}
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, DisableKeepAlives: true}
	return &readyBalancer{client: &http.Client{Transport: tr, Timeout: 10 * time.Second},
		addrs: addrs, ready: make([]atomic.Bool, len(addrs))}, nil
}

// probe keeps each replica's readiness as the kubelet's readiness probe would, until ctx ends.
func (b *readyBalancer) probe(ctx context.Context) {
	for ctx.Err() == nil {
		for i, a := range b.addrs {
			resp, err := b.client.Get("https://" + a + "/readyz")
			ok := err == nil && resp.StatusCode == http.StatusOK
			if err == nil {
				resp.Body.Close()
			}
			b.ready[i].Store(ok)
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// post sends body to path on a ready replica. inFlightCut says the answer was lost because the
// replica died with the request in flight.
func (b *readyBalancer) post(path string, body []byte) (status int, answer []byte, inFlightCut bool, err error) {
	start := int(b.next.Add(1))
	for i := range b.addrs {
		n := (start + i) % len(b.addrs)
		if !b.ready[n].Load() {
			continue
		}
		resp, err := b.client.Post("https://"+b.addrs[n]+path, "application/json", bytes.NewReader(body))
		if errors.Is(err, syscall.ECONNREFUSED) {
			b.ready[n].Store(false) // the endpoint of a dead pod is removed
			continue
		}
		if err != nil {
			// The replica died under this request: a retry must not be sent to it again
			// before the readiness probe has seen it answer (its kernel may still accept
			// connections a dead process will never read).
			b.ready[n].Store(false)
			return 0, nil, true, err
		}
		answer, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			b.ready[n].Store(false)
			return resp.StatusCode, nil, true, err
		}
		return resp.StatusCode, answer, false, nil
	}
	return 0, nil, false, errors.New("no ready replica")
}

// admissionLoad sends, at a fixed rate through loadgen's open loop, what the apiserver would for
// pod creations, alternately privileged and plain, to the URL the webhook holds at that moment,
// and checks each answer against the generation that URL names.
type admissionLoad struct {
	lb      *readyBalancer
	webhook func() string // the webhook's current URL path
	rate    int
	// denial is what generation gen of the policy says when it denies the privileged pod.
	denial func(gen int64) string

	mu       sync.Mutex
	sent     int
	answered int
	cut      int            // in flight on a killed replica, answered right on the retry
	failed   []string       // no answer, or a wrong one
	served   map[int64]bool // generations seen answering a privileged pod with their own message
}

// run sends until ctx ends, then waits for the admissions in flight.
func (l *admissionLoad) run(ctx context.Context) {
	r := loadgen.OpenLoop{Rate: float64(l.rate)}.Run(ctx, func(_ context.Context, seq int) (loadgen.Outcome, error) {
		path := l.webhook()
		if path == "" {
			return loadgen.Skipped, nil // no webhook configured yet: the apiserver would call none
		}
		if !l.admit(path, seq%2 == 0, seq) {
			return loadgen.Failed, errors.New("failed admission (recorded in failed)")
		}
		return loadgen.Correct, nil
	})
	if r.Overflow > 0 {
		l.fail(fmt.Sprintf("%d admissions due while %d were in flight were never sent", r.Overflow, loadgen.DefaultMaxInFlight))
	}
}

// admit sends one review. A request cut in flight by a kill is sent once more: kube-apiserver
// would not replay a POST itself, it would apply failurePolicy (Fail: the write is refused with
// "failed calling webhook" and its client retries), so those are counted apart and reported.
// It reports whether the answer was right.
func (l *admissionLoad) admit(path string, privileged bool, n int) bool {
	gen, err := strconv.ParseInt(path[strings.LastIndex(path, "/")+1:], 10, 64)
	if err != nil {
		l.fail(fmt.Sprintf("webhook path %q names no generation", path))
		return false
	}
	uid := fmt.Sprintf("req-%d", n)
	body := reviewOf(uid, privileged)
	l.mu.Lock()
	l.sent++
	l.mu.Unlock()
	status, answer, cut, err := l.lb.post(path, body)
	if cut {
		l.mu.Lock()
		l.cut++
		l.mu.Unlock()
		status, answer, _, err = l.lb.post(path, body)
	}
	if err != nil {
		l.fail(fmt.Sprintf("%s (privileged=%v): no answer: %v", path, privileged, err))
		return false
	}
	if why := wrongAnswer(status, answer, uid, privileged, l.denial(gen)); why != "" {
		l.fail(fmt.Sprintf("%s (privileged=%v): %s", path, privileged, why))
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.answered++
	if privileged {
		l.served[gen] = true
	}
	return true
}

func (l *admissionLoad) fail(why string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.failed = append(l.failed, why)
}

func (l *admissionLoad) hasServed(gen int64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.served[gen]
}

// wrongAnswer is why an answer is not the policy's, or "": privileged pods denied with a
// message holding denial, others allowed.
func wrongAnswer(status int, answer []byte, uid string, privileged bool, denial string) string {
	if status != http.StatusOK {
		return fmt.Sprintf("HTTP %d: %.200s", status, answer)
	}
	var rev admissionv1.AdmissionReview
	if err := json.Unmarshal(answer, &rev); err != nil || rev.Response == nil {
		return fmt.Sprintf("not an AdmissionReview (%v): %.200s", err, answer)
	}
	r := rev.Response
	if string(r.UID) != uid {
		return fmt.Sprintf("answer for uid %q, sent %q", r.UID, uid)
	}
	if r.Allowed == privileged {
		return fmt.Sprintf("allowed=%v", r.Allowed)
	}
	if privileged {
		if r.Result == nil || !strings.Contains(r.Result.Message, denial) {
			return fmt.Sprintf("denied with another message (another generation?): %+v, want %q", r.Result, denial)
		}
	}
	return ""
}

func reviewOf(uid string, privileged bool) []byte {
	pod := map[string]any{"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": "p", "namespace": "default"},
		"spec": map[string]any{"containers": []any{map[string]any{"name": "app", "image": "nginx:1.27",
			"securityContext": map[string]any{"privileged": privileged}}}}}
	body, _ := json.Marshal(map[string]any{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
		"request": map[string]any{"uid": uid, "operation": "CREATE",
			"kind":      map[string]any{"group": "", "version": "v1", "kind": "Pod"},
			"resource":  map[string]any{"group": "", "version": "v1", "resource": "pods"},
			"namespace": "default", "name": "p", "userInfo": map[string]any{"username": "chaos"}, "object": pod}})
	return body
}

// webhookPath is the path of u, a webhook's URL.
func webhookPath(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return ""
	}
	return p.Path
}
