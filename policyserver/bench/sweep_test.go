package main

import (
	"slices"
	"testing"
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
