package main

import (
	"strings"
	"testing"
)

// TestClickRollupRefused: a top-values count outside 1 to 10,000 or an
// hourly retention under an hour stops serve at start (exit code 2),
// before anything is opened, from a flag or the environment.
func TestClickRollupRefused(t *testing.T) {
	for _, tc := range []struct {
		name, want string
		env        map[string]string
		args       []string
	}{
		{"no values", "--click-top-values 0: want 1 to 10000", nil, []string{"--click-top-values", "0"}},
		{"too many values", "--click-top-values 10001: want 1 to 10000", nil, []string{"--click-top-values=10001"}},
		{"short retention", "--click-hours-retention 30m0s: want at least 1h", nil, []string{"--click-hours-retention", "30m"}},
		{"negative retention", "--click-hours-retention -1h0m0s: want at least 1h", nil, []string{"--click-hours-retention=-1h"}},
		{"environment", "--click-top-values -3: want 1 to 10000", map[string]string{"EDGELINK_CLICK_TOP_VALUES": "-3"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"--database-url", "postgres://127.0.0.1:1/none", "serve"}, tc.args...)
			_, _, err := runCLIEnv(t, tc.env, args...)
			if err == nil || !strings.Contains(err.Error(), tc.want) || exitCode(err) != exitUsage {
				t.Fatalf("%v (env %v): %v; want a usage error saying %q", args, tc.env, err, tc.want)
			}
		})
	}
}
