package dryrun

import (
	"fmt"
	"io"
	"strings"
)

// WriteText prints a result as OCM's dryrun does: the changes (the diffs) first, then the
// compliance message.
func WriteText(w io.Writer, r Result) {
	fmt.Fprintln(w, "# Diffs:")
	for _, c := range r.Changes {
		id := c.Name
		if c.Namespace != "" {
			id = c.Namespace + "/" + c.Name
		}
		fmt.Fprintf(w, "%s %s %s (%s):\n", c.APIVersion, c.Kind, id, c.Action)
		fmt.Fprint(w, c.Diff)
		if c.Diff != "" && !strings.HasSuffix(c.Diff, "\n") {
			fmt.Fprintln(w)
		}
	}
	fmt.Fprintln(w, "# Compliance messages:")
	fmt.Fprintln(w, r.Message)
}
