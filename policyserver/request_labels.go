package policyserver

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// requestLabels reads requestKind.kind (kind.kind without it), namespace and operation from an
// AdmissionRequest without decoding it: it runs for every evaluation, and json.Decoder's tokens
// cost an allocation each. The scan walks the top-level keys over the bytes, stepping over the
// objects without parsing them, to the end, and takes each field as encoding/json would: keys
// matched case-insensitively, the last of duplicates winning, null leaving a value as it was,
// invalid UTF-8 replaced (Prometheus refuses a label value that is not UTF-8). So any layout gives
// the labels a full decode would; malformed input yields what was read before the fault.
func requestLabels(request []byte) (kind, namespace, operation string) {
	s := scanner{b: request}
	type gvk struct {
		Kind string `json:"kind"`
	}
	var kindGVK gvk
	var requestKind *gvk
	if !s.consume('{') {
		return "", "", ""
	}
	for !s.consume('}') {
		key, ok := s.str()
		if !ok || !s.consume(':') {
			break
		}
		start := s.skipWS()
		if !s.skipValue() {
			break
		}
		value := request[start:s.i]
		switch {
		case bytes.EqualFold(key, []byte("requestKind")):
			_ = json.Unmarshal(value, &requestKind)
		case bytes.EqualFold(key, []byte("kind")):
			_ = json.Unmarshal(value, &kindGVK)
		case bytes.EqualFold(key, []byte("namespace")):
			stringInto(value, &namespace)
		case bytes.EqualFold(key, []byte("operation")):
			stringInto(value, &operation)
		}
		s.consume(',')
	}
	if requestKind != nil && requestKind.Kind != "" {
		return requestKind.Kind, namespace, operation
	}
	return kindGVK.Kind, namespace, operation
}

// stringInto sets *dst to a JSON string's text: without escapes and in valid UTF-8 (every kind,
// namespace and operation kube-apiserver sends) a copy of the bytes, otherwise as encoding/json
// decodes it (null leaves *dst alone).
func stringInto(value []byte, dst *string) {
	if len(value) >= 2 && value[0] == '"' {
		inner := value[1 : len(value)-1]
		if bytes.IndexByte(inner, '\\') < 0 && utf8.Valid(inner) {
			*dst = string(inner)
			return
		}
	}
	_ = json.Unmarshal(value, dst)
}

// scanner walks JSON bytes; it validates only as much as finding value boundaries needs.
type scanner struct {
	b []byte
	i int
}

func (s *scanner) skipWS() int {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return s.i
		}
	}
	return s.i
}

func (s *scanner) consume(c byte) bool {
	s.skipWS()
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// str reads a string (a key) at the cursor: the bytes between the quotes, decoded only when it
// has escapes.
func (s *scanner) str() ([]byte, bool) {
	start := s.skipWS()
	if !s.skipString() {
		return nil, false
	}
	raw := s.b[start:s.i]
	if bytes.IndexByte(raw, '\\') >= 0 {
		var key string
		stringInto(raw, &key)
		return []byte(key), true
	}
	return raw[1 : len(raw)-1], true
}

func (s *scanner) skipString() bool {
	if s.i >= len(s.b) || s.b[s.i] != '"' {
		return false
	}
	for s.i++; s.i < len(s.b); s.i++ {
		switch s.b[s.i] {
		case '\\':
			s.i++
		case '"':
			s.i++
			return true
		}
	}
	return false
}

// skipValue moves past one value: a string, an object or array (nesting counted, strings inside
// skipped whole so their brackets do not count), or a literal.
func (s *scanner) skipValue() bool {
	s.skipWS()
	if s.i >= len(s.b) {
		return false
	}
	switch s.b[s.i] {
	case '"':
		return s.skipString()
	case '{', '[':
		depth := 0
		for s.i < len(s.b) {
			switch s.b[s.i] {
			case '"':
				if !s.skipString() {
					return false
				}
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					s.i++
					return true
				}
			}
			s.i++
		}
		return false
	default:
		for s.i < len(s.b) {
			switch s.b[s.i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return true
			}
			s.i++
		}
		return true
	}
}
