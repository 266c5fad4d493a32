package addonidentity

import (
	"bytes"
	"os"
	"reflect"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

// docs/install.md shows the hub Role for clusters installed without OCM's agents; it must grant
// exactly what HubRole does, or those agents would be refused (or over-granted) on the hub.
func TestInstallDocs_HubRoleMatchesHubRole(t *testing.T) {
	doc, err := os.ReadFile("../docs/install.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := bytes.Cut(doc, []byte("<!-- hub-role -->"))
	if !ok {
		t.Fatal("docs/install.md has no <!-- hub-role --> block")
	}
	_, rest, _ = bytes.Cut(rest, []byte("```yaml\n"))
	block, _, ok := bytes.Cut(rest, []byte("```"))
	if !ok {
		t.Fatal("the hub-role block is not a fenced yaml block")
	}
	var lines [][]byte
	for _, l := range bytes.Split(block, []byte("\n")) {
		lines = append(lines, bytes.TrimPrefix(l, []byte("   ")))
	}
	got := &rbacv1.Role{}
	if err := yaml.UnmarshalStrict(bytes.Join(lines, []byte("\n")), got); err != nil {
		t.Fatal(err)
	}
	want := HubRole("cluster1")
	if got.Name != want.Name || got.Namespace != want.Namespace || !reflect.DeepEqual(got.Rules, want.Rules) {
		t.Errorf("docs/install.md's Role\n%+v\nis not HubRole(\"cluster1\")\n%+v", got, want)
	}
}
