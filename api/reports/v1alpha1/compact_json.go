package v1alpha1

import (
	"bytes"
	"encoding/json"
)

// zeroTimestamp is how the openreports result type writes a result without a timestamp.
var zeroTimestamp = []byte(`{"seconds":0,"nanos":0}`)

// MarshalJSON writes the results without the empty source and zero timestamp that the openreports
// result type serialises whatever their value. Per-resource reports are most of a cluster's report
// bytes, and in a report of five results these two fields are an eighth of the object: without
// them, two reports fit in one etcd page instead of one (docs/reports.md). The schema requires
// neither, and decoding gives back the same zero values.
func (s ResourceReportSpec) MarshalJSON() ([]byte, error) {
	results := make([]json.RawMessage, len(s.Results))
	for i := range s.Results {
		raw, err := json.Marshal(&s.Results[i])
		if err != nil {
			return nil, err
		}
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(raw, &fields); err != nil {
			return nil, err
		}
		if string(fields["source"]) == `""` {
			delete(fields, "source")
		}
		if bytes.Equal(fields["timestamp"], zeroTimestamp) {
			delete(fields, "timestamp")
		}
		if results[i], err = json.Marshal(fields); err != nil {
			return nil, err
		}
	}
	if len(results) == 0 {
		return []byte(`{}`), nil
	}
	return json.Marshal(struct {
		Results []json.RawMessage `json:"results"`
	}{results})
}
