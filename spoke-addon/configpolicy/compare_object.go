package configpolicy

// compareObject compares an object on the cluster with an object template and returns whether it
// complies and, when it does not, the object to write so that it would. Only the template's
// top-level fields are compared; apiVersion and kind identify the object; of metadata only labels
// and annotations are compared (with metadataOnlyHave, which defaults to onlyHave); status is
// compared but never written, as no client may set it through the main resource.
func compareObject(template, existing map[string]any, onlyHave, metadataOnlyHave bool) (bool, map[string]any) {
	ok := true
	desired := deepCopy(existing).(map[string]any)
	for key, tv := range template {
		switch key {
		case "apiVersion", "kind":
			continue
		case "metadata":
			tm, _ := tv.(map[string]any)
			em, _ := existing["metadata"].(map[string]any)
			for _, field := range []string{"labels", "annotations"} {
				want, given := tm[field]
				if !given {
					continue
				}
				if !matches(want, em[field], metadataOnlyHave) {
					ok = false
					// Made only for a write: a compliant object's desired copy is the
					// existing one, metadata absent or not.
					dm, _ := desired["metadata"].(map[string]any)
					if dm == nil {
						dm = map[string]any{}
						desired["metadata"] = dm
					}
					dm[field] = merge(want, em[field], metadataOnlyHave)
				}
			}
		case "status":
			if !matches(tv, existing[key], onlyHave) {
				ok = false
			}
		default:
			if !matches(tv, existing[key], onlyHave) {
				ok = false
				desired[key] = merge(tv, existing[key], onlyHave)
			}
		}
	}
	return ok, desired
}
