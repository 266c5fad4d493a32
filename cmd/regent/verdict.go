package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

// The policy author's commands answer a question, and scripts need to tell the answer from a
// failure to get one, as OCM's dryrun does: exit code 0 is yes (allowed, compliant, every test
// passed), 2 is no (rejected, NonCompliant, a test failed), and 1 (any other error, as for every
// regent command) means no answer was reached.
const exitNo = 2

// noError is the "no" answer; its message goes to stderr, the answer itself to stdout.
type noError struct{ msg string }

func (e noError) Error() string { return e.msg }

func answeredNo(format string, args ...any) error { return noError{fmt.Sprintf(format, args...)} }

// exitOnNo runs a command whose "no" answer exits with exitNo instead of the usual 1.
func exitOnNo(run func(*cobra.Command, []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		err := run(cmd, args)
		var no noError
		if errors.As(err, &no) {
			fmt.Fprintln(cmd.ErrOrStderr(), "regent:", no.msg)
			os.Exit(exitNo)
		}
		return err
	}
}
