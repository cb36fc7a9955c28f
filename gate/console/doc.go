// Package console holds the creator console's end-to-end tests: a real
// headless Chromium (Debian's chromium, driven by chromedp) against control
// and an edge on PostgreSQL and NATS (internal/stack). They live outside
// control/ because they follow links on an edge, and nothing under control
// may depend on the edge.
//
// `go tool task test` installs chromium when it is missing and sets
// EDGELINK_CHROMIUM=required, so the tests fail there rather than skip; a
// plain `go test` without /usr/bin/chromium skips them, saying so. With
// EDGELINK_CONSOLE_SCREENSHOTS=dir, TestScreenshots writes a PNG of every
// screen at desktop and phone width into dir (docs/console/ holds them).
package console
