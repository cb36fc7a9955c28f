package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

func TestLinksListEnableDelete(t *testing.T) {
	url, key, _ := apiServer(t)
	env := map[string]string{"EDGELINK_API_KEY": key, "EDGELINK_DATABASE_URL": ""}
	links := func(args ...string) (string, error) {
		t.Helper()
		out, _, err := runCLIEnv(t, env, append([]string{"links", "--api-url", url}, args...)...)
		return out, err
	}
	for i := range 7 {
		if _, err := links("create", fmt.Sprintf("https://example.com/%d?a=1&b=2", i), "--code", fmt.Sprintf("list-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	out, err := links("list", "--limit", "3")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 5 || !strings.HasPrefix(lines[0], "CODE") || !strings.HasPrefix(lines[1], "list-6 ") ||
		!strings.HasSuffix(lines[1], "https://example.com/6?a=1&b=2") || !strings.HasPrefix(lines[4], "more: control links list --cursor ") {
		t.Fatalf("one page of 3:\n%s", out)
	}
	cursor := strings.Fields(strings.TrimPrefix(lines[4], "more: control links list --cursor "))[0]
	out, err = links("list", "--limit", "3", "--cursor", cursor)
	if err != nil || !strings.Contains(out, "list-3 ") || strings.Contains(out, "list-6") {
		t.Fatalf("the next page: %q %v", out, err)
	}
	// --all follows the pages, as text and as one JSON document.
	out, err = links("list", "--limit", "2", "--all")
	if err != nil || strings.Count(out, "list-") != 7 || strings.Count(out, "CODE") != 1 || strings.Contains(out, "more:") {
		t.Fatalf("--all:\n%s %v", out, err)
	}
	out, err = links("--json", "list", "--limit", "2", "--all")
	var page struct {
		Links []struct {
			Code, URL, Status string
		}
		NextCursor *string `json:"next_cursor"`
	}
	if err != nil || json.Unmarshal([]byte(out), &page) != nil || len(page.Links) != 7 || page.NextCursor != nil ||
		page.Links[0].Code != "list-6" || page.Links[0].URL != "https://example.com/6?a=1&b=2" {
		t.Fatalf("--json --all: %q %v", out, err)
	}
	out, err = links("--json", "list", "--limit", "2")
	if err != nil || json.Unmarshal([]byte(out), &page) != nil || len(page.Links) != 2 || page.NextCursor == nil {
		t.Fatalf("--json, one page: %q %v", out, err)
	}

	// Disable, filter, enable, delete.
	if _, err := links("disable", "list-2"); err != nil {
		t.Fatal(err)
	}
	out, err = links("list", "--status", "disabled")
	if err != nil || strings.Count(out, "list-") != 1 || !strings.Contains(out, "list-2 ") {
		t.Fatalf("--status disabled: %q %v", out, err)
	}
	out, err = links("enable", "list-2")
	if err != nil || !strings.Contains(out, "enabled https://sho.rt/list-2") || !strings.Contains(out, "status         active") {
		t.Fatalf("enable: %q %v", out, err)
	}
	out, err = links("delete", "list-2")
	if err != nil || !strings.Contains(out, "deleted list-2") {
		t.Fatalf("delete: %q %v", out, err)
	}
	if _, err := links("delete", "list-2"); err != nil {
		t.Errorf("deleting again: %v; want success (DELETE is idempotent)", err)
	}
	out, err = links("list", "--status", "deleted")
	if err != nil || !strings.Contains(out, "list-2 ") || !strings.Contains(out, "deleted") {
		t.Fatalf("--status deleted: %q %v", out, err)
	}
	out, err = links("list", "--namespace", "nosuch")
	if err != nil || strings.TrimSpace(out) != "no links" {
		t.Errorf("an empty list: %q %v", out, err)
	}

	for _, tc := range []struct {
		args []string
		want string
		code int
	}{
		{[]string{"enable", "list-2"}, "410 Gone", exitNotFound},
		{[]string{"enable", "nope-nope"}, "404 Not Found", exitNotFound},
		{[]string{"delete", "nope-nope"}, "404 Not Found", exitNotFound},
		{[]string{"list", "--status", "gone"}, "400 Bad Request", exitUsage},
		{[]string{"list", "--created-after", "yesterday"}, "created_after must be an RFC 3339 time", exitUsage},
		{[]string{"list", "--limit", "500"}, "400 Bad Request", exitUsage},
		{[]string{"create", "https://example.com/", "--code", "list-1"}, "409 Conflict", exitConflict},
		{[]string{"create", "https://example.com/", "--expires-in=-1h"}, "--expires-in must be positive", exitUsage},
	} {
		_, err := links(tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) || exitCode(err) != tc.code {
			t.Errorf("%v: %v (exit %d); want %q, exit %d", tc.args, err, exitCode(err), tc.want, tc.code)
		}
	}
	_, _, err = runCLIEnv(t, map[string]string{"EDGELINK_API_KEY": "elk_wrong"}, "links", "--api-url", url, "list")
	if exitCode(err) != exitAuth {
		t.Errorf("a wrong key: %v, exit %d; want %d", err, exitCode(err), exitAuth)
	}
	_, _, err = runCLIEnv(t, map[string]string{"EDGELINK_API_KEY": ""}, "links", "--api-url", url, "list")
	if exitCode(err) != exitUsage {
		t.Errorf("no key: %v, exit %d; want %d", err, exitCode(err), exitUsage)
	}
	_, _, err = runCLIEnv(t, env, "links", "--api-url", "http://127.0.0.1:1", "list")
	if exitCode(err) != exitUnavailable {
		t.Errorf("no API there: %v, exit %d; want %d", err, exitCode(err), exitUnavailable)
	}
}
