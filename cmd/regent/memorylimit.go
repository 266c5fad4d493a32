package main

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/resource"
)

// parseMemoryLimit reads a --memory-limit quantity ("64Mi", "-1"); empty is 0, the adaptive limit.
func parseMemoryLimit(v string) (int64, error) {
	if v == "" {
		return 0, nil
	}
	q, err := resource.ParseQuantity(v)
	if err != nil {
		return 0, fmt.Errorf("--memory-limit: %w", err)
	}
	return q.Value(), nil
}
