package loadgen

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"time"
)

// Target is what every request of a run sends and expects.
type Target struct {
	URL     string
	Body    []byte
	Headers map[string]string
	// Check, when set, must accept each 200 answer's body; a rejected one counts as an error.
	Check func([]byte) error
}

// Result is what one run measured: the answered requests after the warmup, over Elapsed.
type Result struct {
	Requests, Errors int
	Elapsed          time.Duration
	P50, P99         time.Duration
}

// Rate is the answered requests per second.
func (r Result) Rate() float64 { return float64(r.Requests) / r.Elapsed.Seconds() }

// Run is the closed loop: each worker has its own keep-alive connection, like wrk's connections,
// and sends its next request when the last one is answered. It loads t from concurrency workers for warmup+duration, measuring only after the warmup;
// caPEM verifies the server. The error is the first failure seen, also when some requests
// succeeded; with none it says so.
func Run(t Target, caPEM []byte, concurrency int, warmup, duration time.Duration) (Result, error) {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	start := time.Now()
	measureFrom, stopAt := start.Add(warmup), start.Add(warmup+duration)
	var (
		mu       sync.Mutex
		all      []time.Duration
		errs     int
		firstErr error
		wg       sync.WaitGroup
	)
	for range concurrency {
		wg.Go(func() {
			client := &http.Client{Transport: &http.Transport{
				TLSClientConfig:     &tls.Config{RootCAs: pool},
				MaxIdleConnsPerHost: 1,
				DisableCompression:  true,
			}}
			defer client.CloseIdleConnections()
			var lat []time.Duration
			var nerr int
			for {
				t0 := time.Now()
				if t0.After(stopAt) {
					break
				}
				err := post(client, t)
				if t0.Before(measureFrom) {
					continue
				}
				if err != nil {
					nerr++
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					continue
				}
				lat = append(lat, time.Since(t0))
			}
			mu.Lock()
			all = append(all, lat...)
			errs += nerr
			mu.Unlock()
		})
	}
	wg.Wait()
	if len(all) == 0 {
		return Result{}, fmt.Errorf("no successful request: %v", firstErr)
	}
	slices.Sort(all)
	pct := func(p float64) time.Duration { return all[int(p*float64(len(all)-1))] }
	return Result{Requests: len(all), Errors: errs, Elapsed: duration, P50: pct(0.50), P99: pct(0.99)}, firstErr
}

func post(client *http.Client, t Target) error {
	req, err := http.NewRequest(http.MethodPost, t.URL, bytes.NewReader(t.Body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range t.Headers {
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d: %s", resp.StatusCode, b)
	}
	if t.Check != nil {
		return t.Check(b)
	}
	return nil
}
