package main

import "testing"

func TestConsoleCookies(t *testing.T) {
	for v, want := range map[string]string{"auto": "nil", "secure": "true", "insecure": "false"} {
		got := "nil"
		if p := consoleCookies(v); p != nil {
			got = map[bool]string{true: "true", false: "false"}[*p]
		}
		if got != want {
			t.Errorf("--console-cookies %s: %s; want %s", v, got, want)
		}
	}
}
