package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestCheck(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/readyz":
			w.Write([]byte("ok"))
		case "/redirect":
			http.Redirect(w, r, "/readyz", http.StatusFound)
		default:
			http.Error(w, "not ready: replaying", http.StatusServiceUnavailable)
		}
	}))
	t.Cleanup(srv.Close)

	tests := []struct {
		args    []string
		wantErr string // "" for success
	}{
		{[]string{srv.URL + "/readyz"}, ""},
		{[]string{srv.URL + "/startupz"}, "503 Service Unavailable: not ready: replaying"},
		{[]string{srv.URL + "/redirect"}, "302 Found"},
		{[]string{"http://127.0.0.1:1/readyz"}, "connect"},
		{nil, "usage"},
		{[]string{"a", "b"}, "usage"},
	}
	for _, tt := range tests {
		err := check(tt.args, 5*time.Second)
		switch {
		case tt.wantErr == "" && err != nil:
			t.Errorf("check(%q) = %v, want success", tt.args, err)
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("check(%q) = %v, want an error containing %q", tt.args, err, tt.wantErr)
		}
	}
}
