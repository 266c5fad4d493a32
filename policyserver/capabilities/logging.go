package capabilities

import (
	"encoding/json"
	"sort"

	"github.com/go-logr/logr"
)

// maxLogLine bounds one guest line in the server's log: the engine rate-limits lines, this keeps
// each of them from being megabytes long.
const maxLogLine = 4 << 10

// logLine writes a guest's tracing/log line into the server's log. Kubewarden's SDKs send one
// JSON object per line with a level and a message; the other fields become key/values, sorted
// so the same line always logs the same way. A line that is not JSON is logged as it is; a line
// over maxLogLine is logged as its head, marked truncated.
func logLine(log logr.Logger, policy string, payload []byte) error {
	log = log.WithValues("policy", policy)
	if len(payload) > maxLogLine {
		log.Info(string(payload[:maxLogLine]), "truncated", true, "bytes", len(payload))
		return nil
	}
	var fields map[string]any
	if err := json.Unmarshal(payload, &fields); err != nil {
		log.Info(string(payload))
		return nil
	}
	level, _ := fields["level"].(string)
	msg, _ := fields["message"].(string)
	if msg == "" {
		msg, _ = fields["msg"].(string)
	}
	keys := make([]string, 0, len(fields))
	for k := range fields {
		if k != "level" && k != "message" && k != "msg" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	kv := make([]any, 0, 2*len(keys))
	for _, k := range keys {
		kv = append(kv, k, fields[k])
	}
	switch level {
	case "error", "fatal", "crit", "critical":
		log.Error(nil, msg, kv...)
	case "debug", "trace":
		log.V(1).Info(msg, kv...)
	case "", "info":
		log.Info(msg, kv...)
	default:
		log.Info(msg, append(kv, "level", level)...)
	}
	return nil
}
