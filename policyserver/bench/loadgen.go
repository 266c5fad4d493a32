package main

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

// result is what one load run measured.
type result struct {
	requests int
	errors   int
	elapsed  time.Duration
	p50, p99 time.Duration
}

func (r result) rate() float64 { return float64(r.requests) / r.elapsed.Seconds() }

// load runs a closed loop: each of concurrency workers has its own keep-alive HTTP/1.1
// connection (like wrk's connections) and sends the next request when the last one is answered.
// Requests in the warmup are not measured.
func load(url string, body []byte, caPEM []byte, concurrency int, warmup, duration time.Duration, check func([]byte) error) (result, error) {
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
				resp, err := client.Post(url, "application/json", bytes.NewReader(body))
				if err == nil {
					var b []byte
					b, err = io.ReadAll(resp.Body)
					resp.Body.Close()
					if err == nil && resp.StatusCode != http.StatusOK {
						err = fmt.Errorf("status %d: %s", resp.StatusCode, b)
					}
					if err == nil && check != nil {
						err = check(b)
					}
				}
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
		return result{}, fmt.Errorf("no successful request: %v", firstErr)
	}
	slices.Sort(all)
	pct := func(p float64) time.Duration { return all[int(p*float64(len(all)-1))] }
	return result{requests: len(all), errors: errs, elapsed: duration, p50: pct(0.50), p99: pct(0.99)}, firstErr
}
