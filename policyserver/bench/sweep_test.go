package main

import (
	"os"
	"slices"
	"testing"
	"time"
)

func TestParseRates(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    []float64
		wantErr bool
	}{
		{in: "500:3000:500", want: []float64{500, 1000, 1500, 2000, 2500, 3000}},
		{in: "500:1200:500", want: []float64{500, 1000}},
		{in: "250,1000,2000", want: []float64{250, 1000, 2000}},
		{in: "1000", want: []float64{1000}},
		{in: "500:3000:0", wantErr: true},
		{in: "500:x:250", wantErr: true},
		{in: "500,-1", wantErr: true},
		{in: "", wantErr: true},
	} {
		got, err := parseRates(tc.in)
		if (err != nil) != tc.wantErr || !slices.Equal(got, tc.want) {
			t.Errorf("parseRates(%q) = %v, %v; want %v (error: %v)", tc.in, got, err, tc.want, tc.wantErr)
		}
	}
}

func TestParseStatCPU_SumsUserAndSystemTicks(t *testing.T) {
	// A command name with spaces and parentheses, as /proc prints it; utime 250, stime 50.
	stat := "4242 (opa (x) y) S 1 4242 4242 0 -1 4194560 1000 0 0 0 250 50 0 0 20 0 12 0 100 1000000 2000 18446744073709551615"
	got, err := parseStatCPU(stat)
	if err != nil || got != 3*time.Second {
		t.Errorf("parseStatCPU = %v, %v; want 3s", got, err)
	}
	if _, err := parseStatCPU("4242 (opa) S 1 2"); err == nil {
		t.Error("parseStatCPU of a short line: no error")
	}
}

func TestCPUTime_OfThisProcessGrowsWithWork(t *testing.T) {
	before, err := cpuTime(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	// Spin until the kernel has accounted at least one tick more; the loop ends only then.
	for {
		after, err := cpuTime(os.Getpid())
		if err != nil {
			t.Fatal(err)
		}
		if after > before {
			return
		}
	}
}
