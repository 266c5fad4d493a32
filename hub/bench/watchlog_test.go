package bench

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"time"
)

// watchLog logs every list and watch of Policies the hub child sends, and when and how each
// watch stream ended, to path (REGENT_BENCH_HUB_WATCH_LOG). It tells a relist's cause apart: a
// watch the apiserver closed long before its timeout, then a watch from the last version
// answered at once by an error event (410, the version left the watch cache), then a new list.
type watchLog struct {
	next http.RoundTripper
	out  *os.File
	id   atomic.Int64
}

func (l *watchLog) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodGet || !strings.Contains(req.URL.Path, "/policies") {
		return l.next.RoundTrip(req)
	}
	q := req.URL.Query()
	id, began := l.id.Add(1), time.Now()
	l.printf("%d %s %s watch=%s rv=%q initial=%s timeout=%s selector=%q", id, began.UTC().Format("15:04:05.000"), req.URL.Path,
		q.Get("watch"), q.Get("resourceVersion"), q.Get("sendInitialEvents"), q.Get("timeoutSeconds"), q.Get("labelSelector"))
	resp, err := l.next.RoundTrip(req)
	if err != nil {
		l.printf("%d failed after %.1fs: %v", id, time.Since(began).Seconds(), err)
		return resp, err
	}
	l.printf("%d answered %d after %.1fs", id, resp.StatusCode, time.Since(began).Seconds())
	resp.Body = &watchedBody{ReadCloser: resp.Body, log: l, id: id, began: began}
	return resp, nil
}

func (l *watchLog) printf(format string, args ...any) {
	fmt.Fprintf(l.out, format+"\n", args...)
}

// watchedBody notes how a response stream ended, its bytes, and the error events in it.
type watchedBody struct {
	io.ReadCloser
	log    *watchLog
	id     int64
	began  time.Time
	bytes  int64
	errors int
	done   atomic.Bool
}

func (b *watchedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.bytes += int64(n)
	if n > 0 && bytes.Contains(p[:n], []byte(`"type":"ERROR"`)) {
		b.errors++
		b.log.printf("%d error event after %.1fs: %.300s", b.id, time.Since(b.began).Seconds(), p[:n])
	}
	if err != nil {
		b.end(fmt.Sprint(err))
	}
	return n, err
}

func (b *watchedBody) Close() error {
	b.end("closed by the client")
	return b.ReadCloser.Close()
}

func (b *watchedBody) end(how string) {
	if b.done.CompareAndSwap(false, true) {
		b.log.printf("%d ended at %s after %.1fs (%s), %d bytes, %d error events", b.id, time.Now().UTC().Format("15:04:05.000"),
			time.Since(b.began).Seconds(), how, b.bytes, b.errors)
	}
}
