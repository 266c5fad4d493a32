package cache

// SetStagedHook sets the hook Build calls with the staging directory before publishing.
func SetStagedHook(f func(staging string)) { stagedHook = f }
