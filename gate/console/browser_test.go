package console

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/edgelink/edgelink/control/controlserver"
	"github.com/edgelink/edgelink/control/snapshots"
	"github.com/edgelink/edgelink/edge/edgeserver"
	"github.com/edgelink/edgelink/internal/stack"
)

func TestMain(m *testing.M) { stack.Main(m) }

// chromiumPath is Debian's chromium, which the Taskfile installs.
const chromiumPath = "/usr/bin/chromium"

// env is control and an edge in this process, on a fresh database and an
// in-process JetStream server, and a tenant with its key.
type env struct {
	controlURL, edgeURL string
	pg                  *stack.Postgres
	tenant              int64
	key                 string
}

func startStack(t *testing.T) *env {
	t.Helper()
	pg := stack.SharedPostgres(t)
	natsURL := stack.NewNATS(t, stack.NATSConfig{}).URL()
	keys := stack.CodeKeys(t)
	e := stack.NewEdge(t, edgeserver.Config{NATSURL: natsURL, Name: "console", SnapshotDir: t.TempDir(), CodeKeysFile: keys})
	c := stack.NewControl(t, controlserver.Config{DatabaseURL: pg.DSN, NATSURL: natsURL, PublicURL: e.URL,
		Snapshots: snapshots.Schedule{Disabled: true}, CodeKeysFile: keys, DomainKey: stack.CodeKeyName})
	tenant, key := pg.NewTenant(t, "console-"+t.Name())
	return &env{controlURL: c.URL, edgeURL: e.URL, pg: pg, tenant: tenant, key: key}
}

// browser is a headless Chromium of the test's own, with a fresh profile,
// stopped (the process killed and waited for) when the test ends, failed or
// not. dialogs counts the JavaScript dialogs pages opened; each is
// dismissed.
type browser struct {
	ctx     context.Context
	dialogs *atomic.Int64
}

func newBrowser(t *testing.T) *browser {
	t.Helper()
	if msg, fatal := chromiumMissing(chromiumPath, os.Getenv("EDGELINK_CHROMIUM")); msg != "" {
		if fatal {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromiumPath), chromedp.UserDataDir(t.TempDir()),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WindowSize(1280, 900),
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(allocCtx)
	t.Cleanup(func() {
		cancel()
		cancelAlloc() // kills the browser and waits for it
	})
	// The first run starts the browser: no timeout on this context.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	b := &browser{ctx: ctx, dialogs: new(atomic.Int64)}
	go func() {
		for _, err := range chromedp.Events(ctx, page.JavascriptDialogOpening) {
			if err != nil {
				return
			}
			b.dialogs.Add(1)
			_, _ = chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: false})
		}
	}()
	return b
}

// chromiumMissing says why the tests cannot run when there is no browser
// at path, and whether that fails them (required: under the Taskfile) or
// skips them; "" when it is there.
func chromiumMissing(path, requirement string) (msg string, fatal bool) {
	if _, err := os.Stat(path); err == nil {
		return "", false
	}
	msg = fmt.Sprintf("%s is missing: install Debian's chromium (apt-get install -y chromium), as `go tool task test` does", path)
	return msg, requirement == "required"
}

// noScript turns JavaScript off in the browser's tab, as a visitor who
// disabled it.
func (b *browser) noScript(t *testing.T) {
	t.Helper()
	if _, err := chromedp.Call(b.ctx, emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: true}); err != nil {
		t.Fatalf("disable JavaScript: %v", err)
	}
}

// stepTimeout bounds one step on a busy 2-core machine.
const stepTimeout = time.Minute

// do runs steps within stepTimeout, failing the test with what.
func (b *browser) do(t *testing.T, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		loc, _ := chromedp.Run(b.ctx, chromedp.Location())
		t.Fatalf("%s: %v (at %s)", what, err, loc)
	}
}

// run runs one step that returns a value.
func run[T any](t *testing.T, b *browser, what string, a chromedp.Action[T]) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return v
}

// text is the text of the first element sel matches.
func (b *browser) text(t *testing.T, sel string) string {
	t.Helper()
	return run(t, b, "text of "+sel, chromedp.Text(chromedp.CSS(sel)))
}

// signIn signs in with key from the sign-in page.
func (b *browser) signIn(t *testing.T, controlURL, key string) {
	t.Helper()
	b.do(t, "sign in",
		chromedp.Navigate(controlURL+"/console/sign-in"),
		chromedp.WaitVisible(chromedp.ID("key")),
		chromedp.SendKeys(chromedp.ID("key"), key),
		chromedp.Submit(chromedp.ID("signin")),
		// What only the next page has: sign-out (signed in) or the
		// reason (refused). The sign-in page's own heading would match
		// before the post's answer has loaded.
		chromedp.WaitVisible(chromedp.CSS("form.signout, #signin-problem")),
	)
	if loc := run(t, b, "location", chromedp.Location()); loc != controlURL+"/console/links" {
		t.Fatalf("after sign-in at %s; want the links. The page says: %s", loc, b.text(t, "main"))
	}
}

func itoa(n int64) string { return fmt.Sprint(n) }
