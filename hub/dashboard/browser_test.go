package dashboard_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// browserTimeout bounds one wait for the page to show a state; the state comes from an informer
// event, a rebuild and one server-sent event, so a page that never shows it has a bug.
const browserTimeout = 60 * time.Second

// browser starts headless chromium for the test. Without chromium on PATH the test skips and says
// what is missing, unless REGENT_BROWSER=1 (CI), where a missing browser is a failure.
func browser(t *testing.T) *page {
	t.Helper()
	path := ""
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			path = p
			break
		}
	}
	if path == "" {
		msg := "no chromium on PATH (Debian: apt-get install chromium); the browser tests need a real browser"
		if os.Getenv("REGENT_BROWSER") == "1" {
			t.Fatal(msg + ", and REGENT_BROWSER=1 requires them")
		}
		t.Skip(msg)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path),
		// The test server's certificate is self-signed; the sandbox needs privileges a root CI
		// container lacks; /dev/shm is small in containers.
		chromedp.IgnoreCertErrors, chromedp.NoSandbox, chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WindowSize(1440, 1000))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	if err := chromedp.Run(ctx); err != nil {
		t.Fatalf("start %s: %v", path, err)
	}
	dir := os.Getenv("REGENT_ARTIFACTS")
	if dir == "" {
		dir = t.TempDir()
	} else {
		dir = filepath.Join(dir, t.Name())
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return &page{t: t, ctx: ctx, dir: dir}
}

// page is the browser tab a test drives.
type page struct {
	t   *testing.T
	ctx context.Context
	dir string
}

func (p *page) run(what string, actions ...chromedp.Action) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, browserTimeout)
	defer cancel()
	if err := chromedp.Run(ctx, actions...); err != nil {
		var shows string
		_ = chromedp.Run(p.ctx, chromedp.Evaluate(`location.href + ": " + document.body.innerText.slice(0, 400)`, &shows))
		p.t.Fatalf("%s: %v; the page at %s", what, err, shows)
	}
}

// until waits for a JavaScript expression over the DOM to hold; on timeout it fails with what
// the diagnostic expression says the page shows.
func (p *page) until(what, expr, diagnostic string) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, browserTimeout)
	defer cancel()
	var ok bool
	if err := chromedp.Run(ctx, chromedp.Poll(expr, &ok, chromedp.WithPollingInterval(100*time.Millisecond))); err != nil {
		var shows string
		_ = chromedp.Run(p.ctx, chromedp.Evaluate(diagnostic, &shows))
		p.screenshot("failed-" + what)
		p.t.Fatalf("page never showed %s (%v); it shows: %s", what, err, shows)
	}
}

func (p *page) eval(expr string, out any) {
	p.t.Helper()
	p.run("evaluate "+expr, chromedp.Evaluate(expr, out))
}

// screenshot keeps the page as a PNG in the artefact folder (REGENT_ARTIFACTS/<test>, or the
// test's temporary folder).
func (p *page) screenshot(name string) {
	p.t.Helper()
	var png []byte
	ctx, cancel := context.WithTimeout(p.ctx, browserTimeout)
	defer cancel()
	if err := chromedp.Run(ctx, chromedp.FullScreenshot(&png, 100)); err != nil {
		p.t.Errorf("screenshot %s: %v", name, err)
		return
	}
	file := filepath.Join(p.dir, name+".png")
	if err := os.WriteFile(file, png, 0o644); err != nil {
		p.t.Errorf("screenshot %s: %v", name, err)
		return
	}
	p.t.Logf("screenshot %s (%d bytes)", file, len(png))
}

// signIn opens the dashboard, is shown the sign-in form (the page answered 401) and signs in with
// token, then opens query.
func (p *page) signIn(base, token, query string) {
	p.t.Helper()
	p.run("open the dashboard", chromedp.Navigate(base+"/dashboard/"), chromedp.WaitVisible("#token", chromedp.ByID))
	var status string
	p.eval(`document.body.dataset.status`, &status)
	if status != "401" {
		p.t.Errorf("sign-in page says status %q, want 401", status)
	}
	p.run("sign in", chromedp.SetValue("#token", token, chromedp.ByID), chromedp.Click("#signin", chromedp.ByID),
		chromedp.WaitVisible("#groups", chromedp.ByID))
	p.run("open "+query, chromedp.Navigate(base+"/dashboard/?"+query), chromedp.WaitVisible("#groups", chromedp.ByID))
	// A marker that survives only as long as the page is not reloaded.
	p.eval(`window.__noReload = "kept"`, new(string))
}

func (p *page) notReloaded() {
	p.t.Helper()
	var marker string
	p.eval(`window.__noReload || ""`, &marker)
	if marker != "kept" {
		p.t.Errorf("the page was reloaded; it must update in place through server-sent events")
	}
}

func sel(format string, args ...any) string { return fmt.Sprintf(format, args...) }
