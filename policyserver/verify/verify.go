package verify

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"regent.dev/regent/policyserver/engine"
)

// Discover finds the suite files under paths: every YAML file that is a gator Suite or a
// PolicyTest, in directories recursively. A file named on its own must be one of the two.
func Discover(paths []string) ([]string, error) {
	var out []string
	for _, p := range paths {
		info, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		if !info.IsDir() {
			if formatOf(p) == "" {
				return nil, fmt.Errorf("%s is neither a gator Suite (test.gatekeeper.sh) nor a PolicyTest (regent.dev/v1alpha1)", p)
			}
			out = append(out, p)
			continue
		}
		err = filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() || !isYAML(path) {
				return nil
			}
			if formatOf(path) != "" {
				out = append(out, path)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	sort.Strings(out)
	return out, nil
}

func isYAML(path string) bool {
	ext := strings.ToLower(filepath.Ext(path))
	return ext == ".yaml" || ext == ".yml"
}

// formatOf tells a suite file by its apiVersion and kind; "" for anything else (a template,
// an object, a file that is not YAML).
func formatOf(path string) Format {
	var head struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	b, err := os.ReadFile(path)
	if err != nil || yaml.Unmarshal(b, &head) != nil {
		return ""
	}
	switch {
	case head.Kind == "Suite" && strings.HasPrefix(head.APIVersion, "test.gatekeeper.sh/"):
		return FormatGator
	case head.Kind == "PolicyTest" && head.APIVersion == "regent.dev/v1alpha1":
		return FormatPolicyTest
	}
	return ""
}

// Run runs every suite file, in order, each timed. onSuite, when set, sees each suite as it
// finishes, so a long run reports as it goes.
func Run(ctx context.Context, files []string, opts Options, onSuite func(Suite)) (Report, error) {
	e, err := engine.New(ctx, engine.Options{})
	if err != nil {
		return Report{}, fmt.Errorf("start engine: %w", err)
	}
	defer e.Close(context.Background())
	var r Report
	for _, f := range files {
		s := Suite{Path: f, Format: formatOf(f)}
		start := time.Now()
		var err error
		switch s.Format {
		case FormatGator:
			s.Cases, err = runGator(ctx, e, f)
		case FormatPolicyTest:
			s.Cases, err = runPolicyTest(ctx, f, opts)
		default:
			err = fmt.Errorf("not a suite file")
		}
		s.Duration = time.Since(start)
		s.Seconds = s.Duration.Seconds()
		if err != nil {
			s.Error = err.Error()
		}
		if ctx.Err() != nil {
			return r, ctx.Err()
		}
		r.Suites = append(r.Suites, s)
		if onSuite != nil {
			onSuite(s)
		}
	}
	return r, nil
}
