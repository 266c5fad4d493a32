package status

import (
	"strings"
	"testing"

	policyv1 "regent.dev/regent/api/policy/v1"
)

func TestTTY_RedrawsOneBarPerGroupInPlace(t *testing.T) {
	r := Rollout{Namespace: "ns", Policy: "p", Current: true, Status: policyv1.RolloutProgressing, Groups: []Group{
		{Index: 0, Name: "canary", Clusters: []ClusterState{{Name: "a", Status: policyv1.RolloutSucceeded}, {Name: "b", Status: policyv1.RolloutFailed}}},
		{Index: 1, Clusters: []ClusterState{{Name: "c", Status: policyv1.RolloutToApply}}},
	}}
	var b strings.Builder
	tty := &ttyRenderer{out: &b}
	tty.render(r)
	first := b.String()
	for _, want := range []string{"[############!!!!!!!!!!!!]  1/2 succeeded, 1 Failed", "[........................]  0/1 succeeded, 1 ToApply"} {
		if !strings.Contains(first, want) {
			t.Errorf("first frame lacks %q:\n%s", want, first)
		}
	}
	if strings.Contains(first, "\x1b[") {
		t.Errorf("the first frame moves the cursor: %q", first)
	}
	tty.render(r)
	if second := strings.TrimPrefix(b.String(), first); !strings.HasPrefix(second, "\x1b[3A\x1b[J") {
		t.Errorf("the second frame does not go back over the three lines of the first: %q", second)
	}
}
