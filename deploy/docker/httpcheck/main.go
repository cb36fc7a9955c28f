// Command httpcheck is the healthcheck of the distroless images, which have
// no shell and no curl: it GETs one URL and exits 0 on a 2xx answer, 1
// otherwise, so `docker compose` can wait on control's and the edge's
// probes.
package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"
)

func main() {
	if err := check(os.Args[1:], 3*time.Second); err != nil {
		fmt.Fprintln(os.Stderr, "httpcheck:", err)
		os.Exit(1)
	}
}

func check(args []string, timeout time.Duration) error {
	if len(args) != 1 {
		return fmt.Errorf("usage: httpcheck URL (exits 0 on a 2xx answer)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, args[0], nil)
	if err != nil {
		return err
	}
	// A probe answers itself; following a redirect would test something else.
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("GET %s: %s: %s", args[0], resp.Status, body)
	}
	return nil
}
