// Package eventnote keeps Events within what the apiserver takes. An events.k8s.io/v1 Event's note
// may hold 1,024 bytes; a longer one is refused and the Event lost, with nothing but a line in
// the log to say so. A fleet-wide failure (replica writes refused on 3,000 clusters, each error
// quoted) easily says more: the start of it is worth keeping, and the object's conditions hold
// the whole message.
package eventnote

import (
	"fmt"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
)

// MaxBytes is the apiserver's limit on an Event's note.
const MaxBytes = 1024

// cutMark ends a note that was cut.
const cutMark = " …(cut)"

type recorder struct{ events.EventRecorder }

// Capped returns a recorder whose notes are cut to MaxBytes.
func Capped(r events.EventRecorder) events.EventRecorder { return recorder{r} }

func (r recorder) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	r.EventRecorder.Eventf(regarding, related, eventtype, reason, action, "%s", Cut(fmt.Sprintf(note, args...)))
}

// Cut shortens note to at most MaxBytes, at a character boundary, marking where it was cut.
func Cut(note string) string {
	if len(note) <= MaxBytes {
		return note
	}
	n := MaxBytes - len(cutMark)
	for n > 0 && !utf8.RuneStart(note[n]) {
		n--
	}
	return note[:n] + cutMark
}
