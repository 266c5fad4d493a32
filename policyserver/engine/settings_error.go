package engine

import "errors"

// ErrInvalidSettings is wrapped by Load's errors that are about the settings rather than the
// module (not JSON, rejected by the policy, or failing its validate_settings call), so a caller
// can tell a user "fix the settings" from "fix the module".
var ErrInvalidSettings = errors.New("invalid settings")

// settingsError keeps the message of the error it wraps and adds ErrInvalidSettings.
type settingsError struct{ error }

func (e settingsError) Unwrap() []error { return []error{e.error, ErrInvalidSettings} }
