package main

import (
	"encoding/json"
	"fmt"
	"runtime/debug"

	"github.com/spf13/cobra"

	regentversion "regent.dev/regent/version"
)

// version is what the binary knows of its own build: the release (the VERSION file the image is
// tagged with), the VCS revision and whether the tree was modified, and the Go version.
type version struct {
	Version   string `json:"version"`
	Revision  string `json:"revision,omitempty"`
	Modified  bool   `json:"modified,omitempty"`
	GoVersion string `json:"goVersion"`
}

func currentVersion() version {
	v := version{Version: regentversion.Version(), Revision: regentversion.Revision}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return v
	}
	v.GoVersion = info.GoVersion
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			if v.Revision == "" {
				v.Revision = s.Value
			}
		case "vcs.modified":
			v.Modified = s.Value == "true"
		}
	}
	return v
}

func newVersionCommand() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version, VCS revision and Go version regent was built with",
		Example: `  regent version
  # for scripts
  regent version -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			v := currentVersion()
			switch output {
			case "json":
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(v)
			case "":
				line := "regent " + v.Version
				if v.Revision != "" {
					line += " revision " + v.Revision
				}
				if v.Modified {
					line += " (modified)"
				}
				_, err := fmt.Fprintln(cmd.OutOrStdout(), line, v.GoVersion)
				return err
			default:
				return fmt.Errorf("-o %q: want json or nothing", output)
			}
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "json for a machine-readable version")
	return tool(cmd)
}
