// Package chaos holds the tests that break Regent's processes and connections on purpose, on a
// local fleet of real apiservers with Regent running as the real `regent` binary, and check what
// the issue promises: nothing a crash does enforces a policy out of turn, loses or re-creates a
// replica, or stops a rollout from completing. CI runs them small; the environment variables each
// test names scale them up, and docs/reliability.md records the figures of the full-size runs.
package chaos
