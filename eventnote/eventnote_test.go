package eventnote_test

import (
	"context"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"

	"regent.dev/regent/eventnote"
	"regent.dev/regent/fleet/fleettest"
)

func TestCut_KeepsShortNotesAndCutsLongOnesAtACharacter(t *testing.T) {
	if got := eventnote.Cut("short"); got != "short" {
		t.Errorf("a short note became %q", got)
	}
	long := strings.Repeat("é", eventnote.MaxBytes) // two bytes each
	got := eventnote.Cut(long)
	if len(got) > eventnote.MaxBytes || !utf8.ValidString(got) || !strings.HasSuffix(got, "(cut)") {
		t.Errorf("cut note: %d bytes, valid UTF-8 %v, ends %q", len(got), utf8.ValidString(got), got[len(got)-8:])
	}
}

// The limit is the apiserver's: a longer note loses the Event, a capped one arrives.
func TestCapped_AFleetWideNoteStillMakesAnEvent(t *testing.T) {
	hub := fleettest.Hub(t)
	cs := kubernetes.NewForConfigOrDie(hub.Config)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "root", Namespace: "default"}}
	cm, err := cs.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	note := "replica writes failed on 3000 clusters" + strings.Repeat("; cluster: admission webhook denied the request", 100)

	direct := &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{GenerateName: "direct-", Namespace: "default"},
		EventTime: metav1.NowMicro(), ReportingController: "test", ReportingInstance: "test", Action: "Propagate",
		Reason: "ReplicaWriteFailed", Type: corev1.EventTypeWarning, Note: note,
		Regarding: corev1.ObjectReference{Kind: "ConfigMap", Namespace: "default", Name: "root", UID: cm.UID}}
	if _, err := cs.EventsV1().Events("default").Create(ctx, direct, metav1.CreateOptions{}); !apierrors.IsInvalid(err) {
		t.Fatalf("an Event with a %d-byte note: %v, want it refused as invalid", len(note), err)
	}

	b := events.NewBroadcaster(&events.EventSinkImpl{Interface: cs.EventsV1()})
	b.StartRecordingToSink(ctx.Done())
	defer b.Shutdown()
	rec := eventnote.Capped(b.NewRecorder(scheme.Scheme, "test"))
	rec.Eventf(cm, nil, corev1.EventTypeWarning, "ReplicaWriteFailed", "Propagate", "%s", note)
	fleettest.Eventually(t, 30*time.Second, func() (bool, string) {
		list, err := cs.EventsV1().Events("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, e := range list.Items {
			if e.Reason == "ReplicaWriteFailed" {
				if !strings.HasPrefix(note, strings.TrimSuffix(e.Note, " …(cut)")) {
					t.Fatalf("note %q is not the start of the message", e.Note)
				}
				return true, ""
			}
		}
		return false, "no ReplicaWriteFailed Event"
	})
}
