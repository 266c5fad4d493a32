package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// regent runs this test binary as the regent binary (see TestMain) so exit codes are real.
func regent(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	return regentEnv(t, nil, args...)
}

func regentEnv(t *testing.T, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(append(os.Environ(), env...), cliEnv+"="+strings.Join(args, " "))
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		code = exit.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

const (
	regoPolicy = "../../policyserver/testdata/rego/require-team-label.rego"
	podNoTeam  = "../../policyserver/localrun/testdata/pod-unlabelled.yaml"
	podReview  = "../../policyserver/localrun/testdata/pod-team-review.json"
)

func TestPolicyRun_PrintsTheServersReviewAndExits2WhenRejected(t *testing.T) {
	out, errOut, code := regent(t, "policy", "run", "--policy", regoPolicy, "--request", podNoTeam)
	if code != exitNo || !strings.Contains(errOut, "rejected by policy require-team-label: Pod web has no team label") {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	var review struct {
		Kind     string `json:"kind"`
		Response struct {
			Allowed bool `json:"allowed"`
			Status  struct {
				Code int `json:"code"`
			} `json:"status"`
		} `json:"response"`
	}
	if err := json.Unmarshal([]byte(out), &review); err != nil || review.Kind != "AdmissionReview" || review.Response.Allowed || review.Response.Status.Code != 403 {
		t.Errorf("stdout %q (%v)", out, err)
	}

	if _, errOut, code := regent(t, "policy", "run", "-p", regoPolicy, "-r", podReview); code != 0 {
		t.Errorf("allowed request: exit %d, %s", code, errOut)
	}
	if out, errOut, code := regent(t, "policy", "run", "-p", "missing.rego", "-r", podReview); code != 1 || out != "" || !strings.Contains(errOut, "missing.rego") {
		t.Errorf("missing module: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

func TestPolicyRun_GatekeeperTemplateWithConstraintAsSettings(t *testing.T) {
	dir := "../../policyserver/testdata/gatekeeper/requiredlabels/"
	out, _, code := regent(t, "policy", "run", "-p", dir+"template.yaml", "--settings", dir+"constraint.yaml", "-r", dir+"unlabelled.yaml")
	if code != exitNo || !strings.Contains(out, `you must provide labels`) {
		t.Errorf("exit %d, %s", code, out)
	}
}

func TestVerify_ExitCodeTellsPassFromFailure(t *testing.T) {
	out, errOut, code := regent(t, "verify", "../../policyserver/testdata/gatekeeper", "../../policyserver/verify/testdata/passing")
	if code != 0 || !strings.Contains(out, "PASS: 7 suites") {
		t.Errorf("passing: exit %d\n%s%s", code, out, errOut)
	}
	out, _, code = regent(t, "verify", "../../policyserver/verify/testdata/failing")
	if code != exitNo || !strings.Contains(out, "--- FAIL: owner-and-tier/unlabelled-said-to-pass") || !strings.Contains(out, "FAIL: 2 suites") {
		t.Errorf("failing: exit %d\n%s", code, out)
	}
	if _, errOut, code := regent(t, "verify", "../../policyserver/testdata/rego"); code != 1 || !strings.Contains(errOut, "no gator Suite or PolicyTest") {
		t.Errorf("nothing to verify: exit %d, %s", code, errOut)
	}
}

func TestDryrun_PrintsDiffsAndMessageAndExits2WhenNonCompliant(t *testing.T) {
	dir := "../../spoke-addon/configpolicy/dryrun/testdata/"
	out, errOut, code := regent(t, "dryrun", "-p", dir+"policy.yaml", dir+"objects.yaml")
	golden, err := os.ReadFile(dir + "noncompliant.golden")
	if err != nil {
		t.Fatal(err)
	}
	if code != exitNo || out != string(golden) || !strings.Contains(errOut, "policy shop-baseline is NonCompliant") {
		t.Errorf("exit %d, stderr %q, stdout:\n%s", code, errOut, out)
	}
	if out, _, code := regent(t, "dryrun", "-p", dir+"policy.yaml", dir+"objects-compliant.yaml"); code != 0 || !strings.Contains(out, "Compliant; notification") {
		t.Errorf("compliant: exit %d\n%s", code, out)
	}
}
