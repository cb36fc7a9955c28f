package importjobs_test

import (
	"testing"

	"github.com/edgelink/edgelink/control/importer"
	"github.com/edgelink/edgelink/control/importjobs"
)

// TestIdentity: the same file with the same options is the same import;
// another option, or another file, is another.
func TestIdentity(t *testing.T) {
	f := csvRows("a", 5)
	base := importjobs.Identity(f, importjobs.BatchSize, importjobs.Options{Format: importer.Auto, DefaultDomains: []string{"b.test", "a.test"}})
	if base != importjobs.Identity(f, importjobs.BatchSize, importjobs.Options{Format: importer.YOURLS, DefaultDomains: []string{"a.test", "b.test"}}) {
		t.Error("the format named, or the default domains' order, changed the identity")
	}
	for name, other := range map[string]string{
		"domain":   importjobs.Identity(f, importjobs.BatchSize, importjobs.Options{Domain: "go.acme.test", DefaultDomains: []string{"a.test", "b.test"}}),
		"redirect": importjobs.Identity(f, importjobs.BatchSize, importjobs.Options{RedirectType: 301, DefaultDomains: []string{"a.test", "b.test"}}),
		"defaults": importjobs.Identity(f, importjobs.BatchSize, importjobs.Options{DefaultDomains: []string{"a.test"}}),
		"batch":    importjobs.Identity(f, 100, importjobs.Options{DefaultDomains: []string{"a.test", "b.test"}}),
		"file":     importjobs.Identity(csvRows("a", 6), importjobs.BatchSize, importjobs.Options{DefaultDomains: []string{"a.test", "b.test"}}),
	} {
		if other == base {
			t.Errorf("another %s, the same identity", name)
		}
	}
}
