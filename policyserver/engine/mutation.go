package engine

import (
	"encoding/json"
	"fmt"

	"gomodules.xyz/jsonpatch/v2"
)

// Patch turns a policy's mutated object into the JSONPatch kube-apiserver applies to the
// original (RFC 6902, as AdmissionResponse.patchType JSONPatch requires).
func Patch(original, mutated []byte) ([]byte, error) {
	ops, err := jsonpatch.CreatePatch(original, mutated)
	if err != nil {
		return nil, fmt.Errorf("diff mutated object: %w", err)
	}
	if len(ops) == 0 {
		return nil, nil
	}
	b, err := json.Marshal(ops)
	if err != nil {
		return nil, fmt.Errorf("encode JSONPatch: %w", err)
	}
	return b, nil
}
