package status

import (
	"io"
	"os"

	"golang.org/x/term"
)

// IsTerminal says whether w is a terminal, where -w draws progress bars instead of log lines.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
