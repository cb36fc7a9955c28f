package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDependenciesPointOneWay keeps the architecture: edge and control never
// import each other, and shared imports neither.
func TestDependenciesPointOneWay(t *testing.T) {
	const mod = "github.com/edgelink/edgelink/"
	banned := map[string][]string{
		"./edge/...":    {mod + "control/"},
		"./control/...": {mod + "edge/"},
		"./shared/...":  {mod + "edge/", mod + "control/"},
	}
	for pkgs, bans := range banned {
		out, err := exec.Command("go", "list", "-deps", "-test", "-f", "{{.ImportPath}}", "../../"+strings.TrimPrefix(pkgs, "./")).CombinedOutput()
		if err != nil {
			t.Fatalf("go list %s: %v\n%s", pkgs, err, out)
		}
		for _, dep := range strings.Fields(string(out)) {
			for _, b := range bans {
				if strings.HasPrefix(dep, b) {
					t.Errorf("%s depends on %s", pkgs, dep)
				}
			}
		}
	}
}
