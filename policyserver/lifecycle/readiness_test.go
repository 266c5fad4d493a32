package lifecycle

import (
	"context"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubewardenv1 "regent.dev/regent/api/kubewarden/v1"
)

// A replica is ready while it serves what the webhooks call: a newer generation that fails to
// load on it is a Ready=False condition on that revision, not a readiness failure, and only the
// generation labelled serving holds readiness back.
func TestReadiness_FailingNewGenerationBesideServingOne_StaysReady_ConditionSaysWhy(t *testing.T) {
	e := newEnv(t)
	const ps = "readiness"
	shared := e.policyServer(t, ps)
	r0 := e.startReplica(t, Options{PolicyServer: ps, Replica: 0, SharedCache: shared, Version: "v1"})

	g1 := e.createRevision(t, ps, "p", 1, regoSpec(writeFile(t, "g1.rego", regoSource(t, "g1"))))
	g2File := writeFile(t, "g2.rego", regoSource(t, "g2"))
	g2 := e.createRevision(t, ps, "p", 2, regoSpec(g2File))
	e.setServing(t, g1.Name, true)
	for _, name := range []string{g1.Name, g2.Name} {
		e.waitRevision(t, name, "Ready on replica 0", readyOn(0, ReasonLoaded))
	}
	if code, _ := r0.readyzBody(t); code != http.StatusOK {
		t.Fatalf("replica 0 with both generations loaded: /readyz %d", code)
	}

	// Generation 2's source changes after the leader initialized it; a replica of another
	// version finds no cache entry, compiles from the source, and refuses the changed module.
	if err := os.WriteFile(g2File, regoSource(t, "g2-changed"), 0o644); err != nil {
		t.Fatal(err)
	}
	r1 := e.startReplica(t, Options{PolicyServer: ps, Replica: 1, SharedCache: shared, Version: "v2"})
	e.waitRevision(t, g1.Name, "Ready on replica 1", readyOn(1, ReasonCompiledLocally))
	rev := e.waitRevision(t, g2.Name, "Ready=False on replica 1", func(r *kubewardenv1.PolicyRevision) bool {
		c := report(r, 1)
		return c != nil && c.Ready == metav1.ConditionFalse && c.Reason == ReasonPullError
	})
	if c := report(rev, 1); !strings.Contains(c.Message, "initialized with") {
		t.Errorf("replica 1's report does not say why generation 2 failed: %q", c.Message)
	}
	eventually(t, "replica 1 ready while generation 1 serves", func() bool { code, _ := r1.readyzBody(t); return code == http.StatusOK })
	if _, body := r1.readyzBody(t); !strings.Contains(body, "clusterwide-p/2") {
		t.Errorf("/readyz does not name the generation that failed: %q", body)
	}
	if code, allowed := r1.review(t, "/validate/clusterwide-p/1", "nginx:1.27"); code != http.StatusOK || !allowed {
		t.Errorf("replica 1 answered generation 1 with %d allowed=%v", code, allowed)
	}

	// Were the webhook to call generation 2, replica 1 could not answer it: unready, saying which.
	e.setServing(t, g1.Name, false)
	e.setServing(t, g2.Name, true)
	eventually(t, "replica 1 unready once generation 2 serves", func() bool { code, _ := r1.readyzBody(t); return code == http.StatusServiceUnavailable })
	if _, body := r1.readyzBody(t); !strings.Contains(body, "clusterwide-p/2") {
		t.Errorf("/readyz does not name the serving generation it lacks: %q", body)
	}
	if code, _ := r0.readyzBody(t); code != http.StatusOK {
		t.Errorf("replica 0, which serves generation 2, answered /readyz %d", code)
	}
}

// setServing labels a revision as the one the webhook calls, as the controller does.
func (e *env) setServing(t *testing.T, name string, serving bool) {
	t.Helper()
	var rev kubewardenv1.PolicyRevision
	if err := e.client.Get(context.Background(), client.ObjectKey{Namespace: testNamespace, Name: name}, &rev); err != nil {
		t.Fatal(err)
	}
	base := rev.DeepCopy()
	if serving {
		rev.Labels[kubewardenv1.ServingLabel] = "true"
	} else {
		delete(rev.Labels, kubewardenv1.ServingLabel)
	}
	if err := e.client.Patch(context.Background(), &rev, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
}

// readyzBody is readyz with what the replica said.
func (h *replicaHandle) readyzBody(t *testing.T) (int, string) {
	resp, err := h.client.Get(h.url + "/readyz")
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
