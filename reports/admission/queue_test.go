package admission

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	reportsv1alpha1 "regent.dev/regent/api/reports/v1alpha1"
	"regent.dev/regent/api/scheme"
	"regent.dev/regent/fleet/fleettest"
	"regent.dev/regent/reports"
)

func TestQueue_AnswerBecomesAReportNamedByUIDOwnedAndLabelledWithThePolicyVersion(t *testing.T) {
	c := newClient(t)
	q := startQueue(t, c, Options{})
	ns := createNamespace(t, c, "answer")
	cm := createConfigMap(t, c, ns, "settings")

	q.Offer(Evaluation{Request: admissionRequest(t, "req-1", "UPDATE", cm), Policy: clusterPolicy("require-team"),
		Version: "3", Result: Fail, Message: "label team is missing"})
	q.settle(t, 1)
	q.flush(t, 1)

	r := getReport(t, c, cm)
	if len(r.OwnerReferences) != 1 || r.OwnerReferences[0].UID != cm.UID || r.OwnerReferences[0].Kind != "ConfigMap" {
		t.Errorf("owner references %+v, want the ConfigMap", r.OwnerReferences)
	}
	if got := r.Labels["cpol.reports.regent.dev/require-team"]; got != "3" {
		t.Errorf("policy label = %q, want the policy version 3 (labels %v)", got, r.Labels)
	}
	if got := r.Labels[reportsv1alpha1.LabelSource]; got != "admission" {
		t.Errorf("source label = %q, want admission", got)
	}
	if len(r.Spec.Results) != 1 {
		t.Fatalf("results %+v, want one", r.Spec.Results)
	}
	res := r.Spec.Results[0]
	if res.Result != Fail || res.Policy != "require-team" || res.Rule != "require-team" || res.Description != "label team is missing" ||
		res.Source != ResultSource || reports.ScopeOf(&res) != reportsv1alpha1.PolicyScopeCluster {
		t.Errorf("result %+v", res)
	}
	if s := reports.WithSubjects(r)[0].Subjects; len(s) != 1 || s[0].UID != cm.UID {
		t.Errorf("result %+v", res)
	}
}

func TestQueue_ARequestSentTwiceIsOneResultAndOneWrite(t *testing.T) {
	c := newClient(t)
	q := startQueue(t, c, Options{})
	ns := createNamespace(t, c, "twice")
	cm := createConfigMap(t, c, ns, "settings")
	req := admissionRequest(t, "req-twice", "UPDATE", cm)

	// The second arrives after the first was written: coalescing alone would write again.
	q.Offer(Evaluation{Request: req, Policy: clusterPolicy("p"), Version: "1", Result: Fail, Message: "first"})
	q.settle(t, 1)
	q.flush(t, 1)
	q.Offer(Evaluation{Request: req, Policy: clusterPolicy("p"), Version: "1", Result: Fail, Message: "again"})
	q.settle(t, 2)

	if got := count(q.metrics.skipped.WithLabelValues(skipDuplicate)); got != 1 {
		t.Errorf("duplicates skipped = %v, want 1", got)
	}
	if got := count(q.metrics.writes); got != 1 {
		t.Errorf("writes = %v, want 1", got)
	}
	if r := getReport(t, c, cm); len(r.Spec.Results) != 1 || r.Spec.Results[0].Description != "first" {
		t.Errorf("results %+v, want the first answer alone", r.Spec.Results)
	}
	// The same request answered by another policy is another result.
	q.Offer(Evaluation{Request: req, Policy: clusterPolicy("other"), Version: "1", Result: Pass})
	q.settle(t, 3)
	q.flush(t, 2)
	if r := getReport(t, c, cm); len(r.Spec.Results) != 2 {
		t.Errorf("results %+v, want one per policy", r.Spec.Results)
	}
}

func TestQueue_ABurstOfUpdatesOfOneResourceIsOneWriteWithTheLatestAnswer(t *testing.T) {
	c := newClient(t)
	q := startQueue(t, c, Options{})
	ns := createNamespace(t, c, "burst")
	cm := createConfigMap(t, c, ns, "settings")

	const updates = 20
	for i := range updates {
		result := Fail
		if i == updates-1 {
			result = Pass
		}
		q.Offer(Evaluation{Request: admissionRequest(t, types.UID(fmt.Sprintf("req-%d", i)), "UPDATE", cm),
			Policy: clusterPolicy("p"), Version: "1", Result: result, Message: fmt.Sprintf("update %d", i)})
	}
	q.settle(t, updates)
	q.flush(t, 1)

	if got := count(q.metrics.writes); got != 1 {
		t.Errorf("writes = %v, want 1 for %d updates", got, updates)
	}
	if got := count(q.metrics.coalesced); got != updates-1 {
		t.Errorf("coalesced = %v, want %d", got, updates-1)
	}
	r := getReport(t, c, cm)
	if len(r.Spec.Results) != 1 || r.Spec.Results[0].Result != Pass || r.Spec.Results[0].Description != "update 19" {
		t.Errorf("results %+v, want the last answer alone", r.Spec.Results)
	}
}

func TestQueue_FullQueueDropsAndCountsWithoutBlocking(t *testing.T) {
	c := newClient(t)
	q := startQueue(t, c, Options{Capacity: 1})
	ns := createNamespace(t, c, "full")
	const offered = 3
	for i := range offered {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("cm-%d", i), UID: types.UID(fmt.Sprintf("uid-%d", i))}}
		q.Offer(Evaluation{Request: admissionRequest(t, types.UID(fmt.Sprintf("req-%d", i)), "CREATE", cm),
			Policy: clusterPolicy("p"), Version: "1", Result: Fail})
	}
	// With the clock never stepped nothing is written: one resource waits, the others have no room.
	q.settle(t, offered)
	if got := count(q.metrics.dropped); got != offered-1 {
		t.Errorf("dropped = %v, want %d", got, offered-1)
	}
	if got := count(q.metrics.queued); got != 1 {
		t.Errorf("queued = %v, want 1", got)
	}
}

func TestQueue_OfferDropsWhatExceedsTheByteBudget(t *testing.T) {
	q := startQueue(t, newClient(t), Options{MaxBytes: 10})
	if q.Offer(Evaluation{Request: []byte(strings.Repeat(" ", 11))}) {
		t.Fatal("an answer larger than MaxBytes was accepted")
	}
	if got := count(q.metrics.dropped); got != 1 {
		t.Errorf("dropped = %v, want 1", got)
	}
}

func TestQueue_SkipsAnswersThatCannotHaveAReport(t *testing.T) {
	c := newClient(t)
	q := startQueue(t, c, Options{})
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cm", UID: "uid-1"}}
	noUID := cm.DeepCopy()
	noUID.UID = ""
	dryRun := strings.Replace(string(admissionRequest(t, "r-dry", "UPDATE", cm)), `"uid":"r-dry"`, `"uid":"r-dry","dryRun":true`, 1)
	sub := strings.Replace(string(admissionRequest(t, "r-sub", "UPDATE", cm)), `"uid":"r-sub"`, `"uid":"r-sub","subResource":"status"`, 1)
	for reason, req := range map[string][]byte{
		skipDelete:      admissionRequest(t, "r-del", "DELETE", cm),
		skipOperation:   admissionRequest(t, "r-con", "CONNECT", cm),
		skipNoUID:       admissionRequest(t, "r-nouid", "CREATE", noUID),
		skipDryRun:      []byte(dryRun),
		skipSubresource: []byte(sub),
		skipUndecodable: []byte("{"),
	} {
		q.Offer(Evaluation{Request: req, Policy: clusterPolicy("p"), Version: "1", Result: Fail})
		q.settle(t, count(q.metrics.offered))
		if got := count(q.metrics.skipped.WithLabelValues(reason)); got != 1 {
			t.Errorf("%s: skipped = %v, want 1", reason, got)
		}
	}
	if got := count(q.metrics.queued); got != 0 {
		t.Errorf("queued = %v, want 0", got)
	}
}

// A report can be written for an object that never comes to exist: its CREATE passed this
// policy (in monitor mode) but another webhook denied it. kube-controller-manager's garbage
// collector finds the owner absent and deletes the report.
func TestQueue_ReportOfAnObjectThatWasNeverStoredIsGarbageCollected(t *testing.T) {
	c := newClient(t)
	q := startQueue(t, c, Options{})
	ns := createNamespace(t, c, "denied")
	never := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "denied", UID: "5e1f0000-0000-4000-8000-000000000001"}}
	q.Offer(Evaluation{Request: admissionRequest(t, "req-denied", "CREATE", never), Policy: clusterPolicy("p"), Version: "1", Result: Fail})
	q.settle(t, 1)
	q.flush(t, 1)
	if got := count(q.metrics.writes.WithLabelValues("written")); got != 1 {
		t.Fatalf("written = %v, want 1", got)
	}
	fleettest.Eventually(t, 2*time.Minute, func() (bool, string) {
		err := c.Get(testCtx(t), client.ObjectKey{Namespace: ns, Name: string(never.UID)}, &reportsv1alpha1.ResourceReport{})
		return apierrors.IsNotFound(err), fmt.Sprintf("report of the never-stored ConfigMap still there (%v)", err)
	})
}

// kube-apiserver asks again on every update of an object; a policy's answer is mostly the one it
// gave last time. The queue remembers what its last write left in the report and sends nothing
// for an equal answer: not even the read Apply would need to find that out.
func TestQueue_AnAnswerEqualToTheLastWrittenCostsNoRequest(t *testing.T) {
	c, err := client.NewWithWatch(cluster.Config, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	var requests atomic.Int64
	counting := interceptor.NewClient(c, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			requests.Add(1)
			return c.Get(ctx, key, obj, opts...)
		},
	})
	q := startQueue(t, counting, Options{})
	ns := createNamespace(t, c, "known")
	cm := createConfigMap(t, c, ns, "settings")

	q.Offer(Evaluation{Request: admissionRequest(t, "req-1", "UPDATE", cm), Policy: clusterPolicy("p"), Version: "1", Result: Fail, Message: "no team"})
	q.settle(t, 1)
	q.flush(t, 1)
	if requests.Load() != 1 {
		t.Fatalf("first write read the report %d times, want 1", requests.Load())
	}
	// another update, the same answer: no request
	q.Offer(Evaluation{Request: admissionRequest(t, "req-2", "UPDATE", cm), Policy: clusterPolicy("p"), Version: "1", Result: Fail, Message: "no team"})
	q.settle(t, 2)
	q.flush(t, 2)
	if got := count(q.metrics.writes.WithLabelValues("known")); got != 1 || requests.Load() != 1 {
		t.Errorf("an equal answer: %v known, %d reads in all, want 1 and 1", got, requests.Load())
	}
	// a new policy version is written, as is a different answer
	q.Offer(Evaluation{Request: admissionRequest(t, "req-3", "UPDATE", cm), Policy: clusterPolicy("p"), Version: "2", Result: Fail, Message: "no team"})
	q.settle(t, 3)
	q.flush(t, 3)
	q.Offer(Evaluation{Request: admissionRequest(t, "req-4", "UPDATE", cm), Policy: clusterPolicy("p"), Version: "2", Result: Pass})
	q.settle(t, 4)
	q.flush(t, 4)
	if got := count(q.metrics.writes.WithLabelValues("written")); got != 3 {
		t.Errorf("written = %v, want 3 (first, new version, new answer)", got)
	}
	if r := getReport(t, c, cm); len(r.Spec.Results) != 1 || r.Spec.Results[0].Result != Pass || r.Labels["cpol.reports.regent.dev/p"] != "2" {
		t.Errorf("report %v %+v, want pass at version 2", r.Labels, r.Spec.Results)
	}
}
