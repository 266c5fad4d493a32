package status

import (
	"encoding/json"
	"fmt"
	"io"

	"sigs.k8s.io/yaml"
)

// Output formats every view prints in, as kubectl's -o.
const (
	Table = "table"
	JSON  = "json"
	YAML  = "yaml"
)

// CheckFormat says whether format is one Print knows.
func CheckFormat(format string) error {
	switch format {
	case Table, JSON, YAML:
		return nil
	}
	return fmt.Errorf("-o %q: want table, json or yaml", format)
}

// Print writes view to w as JSON, YAML, or through table for a table.
func Print(w io.Writer, format string, view any, table func(io.Writer) error) error {
	switch format {
	case JSON:
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(view)
	case YAML:
		out, err := yaml.Marshal(view)
		if err != nil {
			return fmt.Errorf("yaml: %w", err)
		}
		_, err = w.Write(out)
		return err
	case Table:
		return table(w)
	}
	return CheckFormat(format)
}
