package loadgen

import (
	"context"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestHTTPSender_ClassifiesEachAnswer(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/saturated":
			http.Error(w, "policy saturated", http.StatusTooManyRequests)
		case "/broken":
			http.Error(w, "boom", http.StatusInternalServerError)
		case "/denies":
			_, _ = w.Write([]byte(`{"allowed":false}`))
		default:
			if r.Header.Get("X-Token") != "t" || r.Header.Get("Content-Type") != "application/json" {
				http.Error(w, "headers missing", http.StatusBadRequest)
				return
			}
			_, _ = w.Write([]byte(`{"allowed":true}`))
		}
	}))
	defer srv.Close()
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	client := NewClient(caPEM, 0)
	check := func(b []byte) error {
		if string(b) != `{"allowed":true}` {
			return errors.New("not allowed: " + string(b))
		}
		return nil
	}
	for _, tc := range []struct {
		path string
		want Outcome
	}{
		{"/allows", Correct},
		{"/denies", Wrong},
		{"/saturated", Rejected},
		{"/broken", Failed},
	} {
		t.Run(tc.path, func(t *testing.T) {
			send := HTTPSender(client, Target{URL: srv.URL + tc.path, Body: []byte(`{}`), Headers: map[string]string{"X-Token": "t"}, Check: check})
			got, err := send(context.Background(), 0)
			if got != tc.want {
				t.Errorf("outcome %d (%v), want %d", got, err, tc.want)
			}
			if (err == nil) != (tc.want == Correct) {
				t.Errorf("error %v for outcome %d: only a correct answer has none", err, got)
			}
		})
	}

	t.Run("no server", func(t *testing.T) {
		send := HTTPSender(client, Target{URL: "https://127.0.0.1:1/", Body: []byte(`{}`)})
		if got, err := send(context.Background(), 0); got != Failed || err == nil {
			t.Errorf("outcome %d (%v), want Failed with an error", got, err)
		}
	})
}
