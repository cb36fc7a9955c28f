package scrape

import (
	"strings"
	"testing"
)

const sample = `# TYPE edge_hits_total counter
edge_hits_total{layer="overlay"} 3
# TYPE bad_total counter
bad_total{code="LEAK01"} 1
bad_total{layer="https://x.example/LEAK02"} 1
# TYPE lat_seconds histogram
lat_seconds_bucket{le="0.1"} 1
lat_seconds_bucket{le="+Inf"} 2
lat_seconds_sum 0.3
lat_seconds_count 2
`

func TestCheckLabels(t *testing.T) {
	fams, err := Parse(strings.NewReader(sample))
	if err != nil {
		t.Fatal(err)
	}
	errs := CheckLabels(fams, []string{"LEAK02", "nothing"})
	var got []string
	for _, e := range errs {
		got = append(got, e.Error())
	}
	all := strings.Join(got, "\n")
	if len(errs) != 2 || !strings.Contains(all, `label "code"`) || !strings.Contains(all, `carries "LEAK02"`) {
		t.Fatalf("CheckLabels found:\n%s\nwant the label name code (not allowed) and the value carrying LEAK02", all)
	}
	if v, ok := Value(fams, "edge_hits_total", "layer", "overlay"); !ok || v != 3 {
		t.Errorf("Value(edge_hits_total, layer=overlay) = %v, %v", v, ok)
	}
	if v, _ := Value(fams, "lat_seconds"); v != 2 {
		t.Errorf("Value(lat_seconds) = %v; want the sample count 2", v)
	}
	names := strings.Join(Names(fams), " ")
	for _, n := range []string{"lat_seconds_bucket", "lat_seconds_sum", "lat_seconds_count", "edge_hits_total"} {
		if !strings.Contains(names, n) {
			t.Errorf("Names lacks %s: %s", n, names)
		}
	}
}
