package dashboard_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	policyv1 "regent.dev/regent/api/policy/v1"
)

// The event stream sends the view at once and again when the fleet changes, and ends with a
// "denied" event once the viewer's permission is taken away.
func TestEvents_StreamUpdatesAndEndsWhenPermissionIsRevoked(t *testing.T) {
	e := newEnv(t)
	e.serveWithCache()
	token := e.viewer("streamer", true)
	ctx, cancel := context.WithTimeout(e.ctx, 2*time.Minute)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, e.srv.URL+"/dashboard/events?q="+e.ns, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != http.StatusOK || ct != "text/event-stream" {
		t.Fatalf("events: %d %s", resp.StatusCode, ct)
	}
	events := make(chan [2]string)
	go func() {
		defer close(events)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		var name string
		for sc.Scan() {
			line := sc.Text()
			if n, ok := strings.CutPrefix(line, "event: "); ok {
				name = n
			} else if d, ok := strings.CutPrefix(line, "data: "); ok {
				events <- [2]string{name, d}
			}
		}
	}()
	next := func(what string) [2]string {
		t.Helper()
		select {
		case ev, ok := <-events:
			if !ok {
				t.Fatalf("the stream ended before %s", what)
			}
			return ev
		case <-ctx.Done():
			t.Fatalf("no event for %s", what)
		}
		return [2]string{}
	}
	if ev := next("the first view"); ev[0] != "view" {
		t.Fatalf("first event %v", ev)
	}
	root := func(i int) *policyv1.Policy {
		return &policyv1.Policy{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p%d", i), Namespace: e.ns},
			Spec: policyv1.PolicySpec{RemediationAction: policyv1.Inform, PolicyTemplates: []*policyv1.PolicyTemplate{{ObjectDefinition: runtime.RawExtension{
				Raw: []byte(`{"apiVersion":"policy.open-cluster-management.io/v1","kind":"ConfigurationPolicy","metadata":{"name":"c"},"spec":{}}`)}}}}}
	}
	e.create(root(0))
	// The first view may predate the cache's sync; a later one shows the new policy.
	for ev := next("the new policy"); !strings.Contains(ev[1], e.ns+"/p0"); ev = next("the new policy") {
		if ev[0] != "view" {
			t.Fatalf("after a policy was created: %v", ev)
		}
	}

	if err := e.kube.RbacV1().ClusterRoleBindings().Delete(e.ctx, e.ns+"-streamer", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// Each change makes the stream review the token again; the hub's answer is cached for a few
	// seconds, so changes go on until the revocation shows.
	for i := 1; ; i++ {
		e.create(root(i))
		ev := next("the revocation")
		if ev[0] == "denied" {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	if _, ok := <-events; ok {
		t.Error("the stream goes on after denied")
	}
}
