package fleet

import (
	"strings"
	"testing"
)

func TestValidateRealNodes(t *testing.T) {
	for _, c := range []struct {
		name string
		opts Options
		want string // "" for valid
	}{
		{"no node", Options{Managed: []ClusterSpec{{Name: "a"}, {Name: "b"}}}, ""},
		{"one node with a pause image", Options{Managed: []ClusterSpec{{Name: "a", RealNode: true}}, PauseImage: "p:1"}, ""},
		{"one node without a pause image", Options{Managed: []ClusterSpec{{Name: "a", RealNode: true}}}, "PauseImage"},
		{"two nodes", Options{Managed: []ClusterSpec{{Name: "a", RealNode: true}, {Name: "b", RealNode: true}}, PauseImage: "p:1"}, "one per host"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := validate(c.opts)
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("error %v, want one naming %q", err, c.want)
			}
		})
	}
}

func TestUnescapeMount(t *testing.T) {
	for in, want := range map[string]string{
		`/tmp/plain`:         "/tmp/plain",
		`/tmp/with\040space`: "/tmp/with space",
		`/tmp/tab\011end`:    "/tmp/tab\tend",
		`/tmp/trailing\04`:   `/tmp/trailing\04`,
		`/tmp/not\999octal`:  `/tmp/not\999octal`,
		`/a\134backslash`:    `/a\backslash`,
	} {
		if got := unescapeMount(in); got != want {
			t.Errorf("unescapeMount(%q) = %q, want %q", in, got, want)
		}
	}
}
