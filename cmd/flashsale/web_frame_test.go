package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/flashsale/flashsale/internal/app"
)

// framingHost is a platform's page that frames the sale page at src and,
// when the page says it is ready, posts it tok; it notes in its body's
// data attributes the origin the page's ready came from and each state
// the page tells it.
const framingHost = `<!doctype html><html><body data-states="">
<iframe id="f" src=%s width="360" height="640"></iframe>
<script>
addEventListener('message', (e) => {
  const d = e.data || {};
  if (d.type === 'flashsale.ready') {
    document.body.dataset.ready = e.origin;
    e.source.postMessage({ type: 'flashsale.token', token: %s }, e.origin);
  }
  if (d.type === 'flashsale.state') document.body.dataset.states += d.state + ' ';
});
</script></body></html>`

// TestBrowserFrameOrigins (issue 23, item 7): the sale page may be framed
// only by this origin's pages and those of FLASHSALE_FRAME_ORIGINS, takes
// a token only from such a parent, and tells it the guest's state. Any
// site could frame it before and post it a token. The host pages are on
// localhost, a different origin from the service's 127.0.0.1.
func TestBrowserFrameOrigins(t *testing.T) {
	ctx := mustBrowser(t)
	var saleURL, tok string
	host := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		src, _ := json.Marshal(saleURL)
		tj, _ := json.Marshal(tok)
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, framingHost, src, tj)
	}))
	defer host.Close()
	stranger := httptest.NewServer(host.Config.Handler)
	defer stranger.Close()
	onLocalhost := func(s *httptest.Server) string { return strings.Replace(s.URL, "127.0.0.1", "localhost", 1) }

	m, c := MustRunMain(t, func(cfg *app.Config) { cfg.FrameOrigins = []string{onLocalhost(host)} })
	id := c.createSale(t, saleJSON([]int{3}, 1, false))
	saleURL, tok = "http://"+m.Addr()+"/sales/"+id, c.jwt("framed-guest")

	// The trusted platform: the page loads framed, says it is ready to
	// its parent's origin, takes the token and goes from no_token to ready.
	runSteps(t, ctx, chromedp.Navigate(onLocalhost(host)+"/"),
		chromedp.Poll[chromedp.Void](`(document.body.dataset.states || '').includes('ready ')`, chromedp.WithPollingTimeout(15*time.Second)))
	if got := attrOf(t, ctx, "body", "data-ready"); got != "http://"+m.Addr() {
		t.Fatalf("ready came from %q, want the service's origin", got)
	}
	states := attrOf(t, ctx, "body", "data-states")
	t.Logf("states told to the trusted parent: %q", states)

	// A stranger's page: the browser refuses to frame the sale page (CSP
	// frame-ancestors), so it never says it is ready and takes no token.
	runSteps(t, ctx, chromedp.Navigate(onLocalhost(stranger)+"/"))
	time.Sleep(3 * time.Second) // the trusted parent heard from the page well within this
	if jsBool(t, ctx, `document.body.dataset.ready !== undefined || document.body.dataset.states !== ''`) {
		t.Fatalf("a stranger's page framed the sale page: ready %q, states %q", attrOf(t, ctx, "body", "data-ready"), attrOf(t, ctx, "body", "data-states"))
	}
}
