package dashboard

import (
	"context"
	"net/http"
	"strings"
)

// Authorizer decides whether a bearer token may verb a non-resource path; placement/opa's
// Authorizer (a TokenReview and a SubjectAccessReview on the hub apiserver, answers cached for a
// few seconds) is the one the hub uses, so the dashboard and the placement query API accept the
// same callers.
type Authorizer interface {
	Authorize(ctx context.Context, token, verb, path string) (authenticated, allowed bool, reason string, err error)
}

// AuthPath and AuthVerb are the non-resource URL and verb a user needs to see the dashboard:
// RBAC grants them with `nonResourceURLs: ["/dashboard"], verbs: ["get"]`. Every dashboard
// request, the page, its data and its event stream, is checked against this one permission.
const (
	AuthPath = "/dashboard"
	AuthVerb = "get"
)

// CookieName holds the token a browser signed in with. Browsers cannot attach an Authorization
// header to a page load or an EventSource, so the login form posts the token once and the server
// puts it in a cookie the page's script cannot read (HttpOnly), that travels only over HTTPS
// (Secure), only to this path and never with a request another site starts (SameSite=Strict).
// The server reviews it on every request exactly as it reviews a bearer token.
const CookieName = "regent-dashboard-token"

// tokenOf returns the request's bearer token, from the Authorization header or else the cookie.
func tokenOf(r *http.Request) string {
	if t, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		return strings.TrimSpace(t)
	}
	if c, err := r.Cookie(CookieName); err == nil {
		return strings.TrimSpace(c.Value)
	}
	return ""
}

// verdict is the outcome of one authorization: an HTTP status and, when refused, why.
type verdict struct {
	status int
	reason string
}

func (s *Server) check(ctx context.Context, token string) verdict {
	if token == "" {
		return verdict{http.StatusUnauthorized, "sign in with a token the hub accepts"}
	}
	authn, allowed, reason, err := s.auth.Authorize(ctx, token, AuthVerb, AuthPath)
	switch {
	case err != nil:
		return verdict{http.StatusInternalServerError, "authorize: " + err.Error()}
	case !authn:
		return verdict{http.StatusUnauthorized, "the hub does not accept this token: " + reason}
	case !allowed:
		return verdict{http.StatusForbidden, reason}
	}
	return verdict{status: http.StatusOK}
}

func setTokenCookie(w http.ResponseWriter, token string, maxAge int) {
	http.SetCookie(w, &http.Cookie{
		Name: CookieName, Value: token, Path: AuthPath, MaxAge: maxAge,
		HttpOnly: true, Secure: true, SameSite: http.SameSiteStrictMode,
	})
}
