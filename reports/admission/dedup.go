package admission

import (
	"k8s.io/apimachinery/pkg/types"

	"regent.dev/regent/reports"
)

// answerKey names one policy's answer to one admission request.
type answerKey struct {
	request types.UID
	policy  reports.PolicyRef
}

// recentAnswers remembers the last size answer keys, oldest forgotten first. kube-apiserver
// sends a request again soon after the first (a retried call, a reinvoked webhook), so a window
// of recent requests catches the repeats in bounded memory.
type recentAnswers struct {
	seen map[answerKey]struct{}
	ring []answerKey
	next int
}

func newRecentAnswers(size int) *recentAnswers {
	return &recentAnswers{seen: make(map[answerKey]struct{}, size), ring: make([]answerKey, 0, size)}
}

// add records k and says whether it was new.
func (r *recentAnswers) add(k answerKey) bool {
	if _, ok := r.seen[k]; ok {
		return false
	}
	if len(r.ring) < cap(r.ring) {
		r.ring = append(r.ring, k)
	} else {
		delete(r.seen, r.ring[r.next])
		r.ring[r.next] = k
		r.next = (r.next + 1) % len(r.ring)
	}
	r.seen[k] = struct{}{}
	return true
}
