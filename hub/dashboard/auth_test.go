package dashboard_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"regent.dev/regent/hub/dashboard"
)

// The dashboard admits exactly whom the hub's placement API admits: a token the apiserver accepts
// (TokenReview) whose user may get /dashboard (SubjectAccessReview); a browser signs in once and
// carries the token in a cookie the page's script cannot read.
func TestAuth_NoTokenIs401_TokenWithoutPermissionIs403_GrantedSeesTheFleet(t *testing.T) {
	e := newEnv(t)
	e.serveWithCache()
	granted, denied := e.viewer("granted", true), e.viewer("denied", false)
	hc := e.srv.Client()
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	do := func(method, path, token string, body io.Reader, header map[string]string) (*http.Response, string) {
		t.Helper()
		req, err := http.NewRequest(method, e.srv.URL+path, body)
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}

	for _, path := range []string{"/dashboard/", "/dashboard/api/view", "/dashboard/events"} {
		if resp, body := do(http.MethodGet, path, "", nil, nil); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("GET %s without a token: %d %q, want 401", path, resp.StatusCode, body)
		}
		if resp, body := do(http.MethodGet, path, "not-a-token", nil, nil); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("GET %s with a token the hub does not accept: %d %q, want 401", path, resp.StatusCode, body)
		}
		if resp, body := do(http.MethodGet, path, denied, nil, nil); resp.StatusCode != http.StatusForbidden {
			t.Errorf("GET %s without the permission: %d %q, want 403", path, resp.StatusCode, body)
		}
	}
	// Without a token the page is the sign-in form, with the refusal's status.
	if _, body := do(http.MethodGet, "/dashboard/", "", nil, nil); !strings.Contains(body, `action="/dashboard/login"`) {
		t.Errorf("the 401 page has no sign-in form: %q", body)
	}
	if resp, body := do(http.MethodGet, "/dashboard/", granted, nil, nil); resp.StatusCode != http.StatusOK || !strings.Contains(body, `id="groups"`) {
		t.Errorf("GET /dashboard/ granted: %d %q", resp.StatusCode, body)
	}
	resp, body := do(http.MethodGet, "/dashboard/api/view", granted, nil, nil)
	var v dashboard.View
	if resp.StatusCode != http.StatusOK || json.Unmarshal([]byte(body), &v) != nil {
		t.Errorf("GET api/view granted: %d %q", resp.StatusCode, body)
	}

	// Signing in: a refused token gets the form again with 403, an admitted one a cookie.
	form := func(token string) io.Reader { return strings.NewReader(url.Values{"token": {token}}.Encode()) }
	formType := map[string]string{"Content-Type": "application/x-www-form-urlencoded"}
	if resp, _ := do(http.MethodPost, "/dashboard/login", "", form(denied), formType); resp.StatusCode != http.StatusForbidden || len(resp.Cookies()) != 0 {
		t.Errorf("sign-in without the permission: %d, cookies %v; want 403 and none", resp.StatusCode, resp.Cookies())
	}
	resp, _ = do(http.MethodPost, "/dashboard/login", "", form(granted), formType)
	if resp.StatusCode != http.StatusSeeOther || len(resp.Cookies()) != 1 {
		t.Fatalf("sign-in: %d, cookies %v; want 303 and one cookie", resp.StatusCode, resp.Cookies())
	}
	c := resp.Cookies()[0]
	if c.Name != dashboard.CookieName || !c.HttpOnly || !c.Secure || c.SameSite != http.SameSiteStrictMode || c.Path != dashboard.AuthPath {
		t.Errorf("cookie %+v: want HttpOnly, Secure, SameSite=Strict on %s", c, dashboard.AuthPath)
	}
	cookie := map[string]string{"Cookie": c.Name + "=" + c.Value}
	if resp, body := do(http.MethodGet, "/dashboard/api/view", "", nil, cookie); resp.StatusCode != http.StatusOK {
		t.Errorf("api/view with the cookie: %d %q", resp.StatusCode, body)
	}
	// Another site's form cannot sign a browser in.
	crossSite := map[string]string{"Content-Type": "application/x-www-form-urlencoded", "Origin": "https://evil.example"}
	if resp, _ := do(http.MethodPost, "/dashboard/login", "", form(granted), crossSite); resp.StatusCode != http.StatusForbidden {
		t.Errorf("cross-origin sign-in: %d, want 403", resp.StatusCode)
	}

	// Read-only: no path takes a write, even from an admitted user.
	for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		for _, path := range []string{"/dashboard/", "/dashboard/api/view", "/dashboard/events"} {
			if resp, _ := do(m, path, granted, strings.NewReader("{}"), nil); resp.StatusCode != http.StatusMethodNotAllowed {
				t.Errorf("%s %s: %d, want 405", m, path, resp.StatusCode)
			}
		}
	}
	// The static files hold no data; they load for the sign-in page.
	if resp, _ := do(http.MethodGet, "/dashboard/static/app.js", "", nil, nil); resp.StatusCode != http.StatusOK {
		t.Errorf("app.js: %d", resp.StatusCode)
	}
}
