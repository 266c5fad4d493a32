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

// target is one server under load: where to POST, with which headers, and the body every answer
// must be (both servers answer byte for byte alike, so one expected body serves both).
type target struct {
	url     string
	headers map[string]string
	body    []byte
	want    []byte
}

type result struct {
	requests, errors int
	elapsed          time.Duration
	p50, p99         time.Duration
}

func (r result) rate() float64 { return float64(r.requests) / r.elapsed.Seconds() }

// load runs a closed loop: each of concurrency workers has its own keep-alive HTTPS connection and
// sends the next request when the last one is answered; the warmup is not measured. (The policy
// server's bench has the same loop, without headers; it lives in that command's main package.)
func load(t target, caPEM []byte, concurrency int, warmup, duration time.Duration) (result, error) {
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
		return result{}, fmt.Errorf("no successful request: %v", firstErr)
	}
	slices.Sort(all)
	pct := func(p float64) time.Duration { return all[int(p*float64(len(all)-1))] }
	return result{requests: len(all), errors: errs, elapsed: duration, p50: pct(0.50), p99: pct(0.99)}, firstErr
}

func post(client *http.Client, t target) error {
	req, err := http.NewRequest(http.MethodPost, t.url, bytes.NewReader(t.body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range t.headers {
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
	if t.want != nil && !bytes.Equal(b, t.want) {
		return fmt.Errorf("answer %s, want %s", b, t.want)
	}
	return nil
}
