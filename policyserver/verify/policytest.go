package verify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"sigs.k8s.io/yaml"

	"regent.dev/regent/policyserver"
	"regent.dev/regent/policyserver/lifecycle/pull"
	"regent.dev/regent/policyserver/localrun"
)

// policyTest is a Regent PolicyTest file (see the package documentation).
type policyTest struct {
	APIVersion string                    `json:"apiVersion"`
	Kind       string                    `json:"kind"`
	Metadata   map[string]any            `json:"metadata"`
	Policy     policyserver.PolicyConfig `json:"policy"`
	Cases      []policyTestCase          `json:"cases"`
}

type policyTestCase struct {
	Name string `json:"name"`
	// Request is a file name (a JSON string) or the document itself.
	Request  json.RawMessage `json:"request"`
	Settings json.RawMessage `json:"settings"`
	Expect   struct {
		Allowed *bool  `json:"allowed"`
		Message string `json:"message"`
		Code    int32  `json:"code"`
		Patched *bool  `json:"patched"`
	} `json:"expect"`
	Skip bool `json:"skip"`
}

// runPolicyTest runs one PolicyTest file: a policy server per distinct settings, each case's
// request through it.
func runPolicyTest(ctx context.Context, path string, opts Options) ([]Case, error) {
	var pt policyTest
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	// Strict: a misspelt expectation would otherwise pass by checking nothing.
	if err := yaml.UnmarshalStrict(b, &pt); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	dir := filepath.Dir(path)
	if m := pt.Policy.Module; m != "" && !strings.Contains(m, "://") && !filepath.IsAbs(m) {
		pt.Policy.Module = filepath.Join(dir, m)
	}
	if len(pt.Cases) == 0 {
		return nil, errors.New("the PolicyTest has no cases")
	}
	runners := map[string]*localrun.Runner{}
	defer func() {
		for _, r := range runners {
			r.Close(context.Background())
		}
	}()
	runner := func(settings json.RawMessage) (*localrun.Runner, error) {
		pc := pt.Policy
		if len(settings) > 0 {
			pc.Settings = settings
		}
		key := string(pc.Settings)
		if r, ok := runners[key]; ok {
			return r, nil
		}
		r, err := localrun.Load(ctx, localrun.Options{Policy: pc, Pull: opts.Pull})
		if err != nil {
			return nil, err
		}
		runners[key] = r
		return r, nil
	}
	out := make([]Case, len(pt.Cases))
	for i, c := range pt.Cases {
		out[i].Name = c.Name
		if c.Skip {
			out[i].Skipped = "the case is marked skip"
			continue
		}
		if err := runPolicyTestCase(ctx, dir, c, runner); err != nil {
			out[i].Failure = err.Error()
		}
	}
	return out, nil
}

func runPolicyTestCase(ctx context.Context, dir string, c policyTestCase, runner func(json.RawMessage) (*localrun.Runner, error)) error {
	if c.Expect.Allowed == nil {
		return errors.New("expect.allowed is required")
	}
	doc, err := requestDocument(dir, c.Request)
	if err != nil {
		return err
	}
	review, err := localrun.ReviewOf(doc)
	if err != nil {
		return err
	}
	r, err := runner(c.Settings)
	if err != nil {
		return err
	}
	res, err := r.Review(ctx, review)
	if err != nil {
		return err
	}
	resp := res.Response
	message := ""
	var code int32
	if resp.Result != nil {
		message, code = resp.Result.Message, resp.Result.Code
	}
	var failures []string
	if resp.Allowed != *c.Expect.Allowed {
		failures = append(failures, fmt.Sprintf("want allowed=%v, got %v (%q)", *c.Expect.Allowed, resp.Allowed, message))
	}
	if c.Expect.Message != "" {
		re, err := regexp.Compile(c.Expect.Message)
		if err != nil {
			return fmt.Errorf("expect.message %q: %w", c.Expect.Message, err)
		}
		if !re.MatchString(message) {
			failures = append(failures, fmt.Sprintf("message %q does not match %q", message, c.Expect.Message))
		}
	}
	if c.Expect.Code != 0 && c.Expect.Code != code {
		failures = append(failures, fmt.Sprintf("want code %d, got %d", c.Expect.Code, code))
	}
	if c.Expect.Patched != nil && *c.Expect.Patched != (len(resp.Patch) > 0) {
		failures = append(failures, fmt.Sprintf("want patched=%v, got patch %s", *c.Expect.Patched, resp.Patch))
	}
	if len(failures) > 0 {
		return errors.New(strings.Join(failures, "; "))
	}
	return nil
}

// requestDocument reads a case's request: a file relative to the test file, or inline.
func requestDocument(dir string, raw json.RawMessage) ([]byte, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, errors.New("the case has no request")
	}
	var file string
	if json.Unmarshal(raw, &file) != nil {
		return raw, nil
	}
	if !filepath.IsAbs(file) {
		file = filepath.Join(dir, file)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("read request: %w", err)
	}
	return b, nil
}

// Options configure a run.
type Options struct {
	// Pull configures the pulls of PolicyTests whose module is remote.
	Pull pull.Options
}
