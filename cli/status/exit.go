package status

import "fmt"

// Exit codes of `regent status rollout`, for scripts: 0 when the rollout succeeded (or, without
// -w, has not failed), 1 when it failed or the command could not find out (as kubectl rollout
// status), ExitTimeout when -w gave up waiting.
const (
	ExitFailed  = 1
	ExitTimeout = 2
)

// ExitError is an error with the exit code the command ends with.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string { return e.Err.Error() }
func (e *ExitError) Unwrap() error { return e.Err }

// rolloutResult is the error, if any, a rollout view ends the command with.
func rolloutResult(r Rollout) error {
	if done, ok := r.Finished(); done && !ok {
		return &ExitError{Code: ExitFailed, Err: fmt.Errorf("rollout of %s/%s failed: %s", r.Namespace, r.Policy, r.Message)}
	}
	return nil
}

// RolloutResult is the error a snapshot of r ends `regent status rollout` with: non-nil only when
// the rollout of the current generation failed.
func RolloutResult(r Rollout) error { return rolloutResult(r) }
