package dashboard

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"time"
)

// Path is where the dashboard is served on the hub's HTTPS address; everything under it is the
// dashboard's.
const Path = "/dashboard/"

// heartbeat keeps an idle event stream open through proxies that close silent connections.
const heartbeat = 20 * time.Second

//go:embed static
var static embed.FS

var loginPage = template.Must(template.ParseFS(static, "static/login.html"))

// Server serves the dashboard: the page, its data as JSON, its live updates as server-sent
// events, and the sign-in that turns a pasted token into a cookie. It has no path that writes
// anything but that cookie.
type Server struct {
	board *Board
	auth  Authorizer
	mux   *http.ServeMux
}

// NewServer serves board's model to the callers auth admits.
func NewServer(board *Board, auth Authorizer) *Server {
	s := &Server{board: board, auth: auth, mux: http.NewServeMux()}
	assets, _ := fs.Sub(static, "static")
	s.mux.Handle("GET "+Path+"static/", http.StripPrefix(Path+"static/", http.FileServerFS(assets)))
	s.mux.HandleFunc("GET "+Path+"{$}", s.page)
	s.mux.HandleFunc("POST "+Path+"login", s.login)
	s.mux.HandleFunc("POST "+Path+"logout", s.logout)
	s.mux.HandleFunc("GET "+Path+"api/view", s.view)
	s.mux.HandleFunc("GET "+Path+"events", s.events)
	return s
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	// Nothing of the page comes from elsewhere, and no other site may frame it.
	h.Set("Content-Security-Policy", "default-src 'self'; frame-ancestors 'none'; form-action 'self'")
	h.Set("X-Content-Type-Options", "nosniff")
	// same-origin, not no-referrer: with no-referrer a browser posts the sign-in form with Origin "null".
	h.Set("Referrer-Policy", "same-origin")
	if r.URL.Path == AuthPath {
		http.Redirect(w, r, Path, http.StatusMovedPermanently)
		return
	}
	s.mux.ServeHTTP(w, r)
}

// page serves the dashboard to a signed-in user and the sign-in form, with the refusal's status
// (401 or 403), to anyone else.
func (s *Server) page(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	if v := s.check(r.Context(), tokenOf(r)); v.status != http.StatusOK {
		s.renderLogin(w, v)
		return
	}
	http.ServeFileFS(w, r, static, "static/index.html")
}

func (s *Server) renderLogin(w http.ResponseWriter, v verdict) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(v.status)
	_ = loginPage.Execute(w, struct {
		Status int
		Reason string
	}{v.status, v.reason})
}

func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	if !sameOrigin(r) {
		http.Error(w, "cross-origin sign-in refused", http.StatusForbidden)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	token := r.PostFormValue("token")
	v := s.check(r.Context(), token)
	if v.status != http.StatusOK {
		s.renderLogin(w, v)
		return
	}
	setTokenCookie(w, token, 0)
	http.Redirect(w, r, Path, http.StatusSeeOther)
}

func (s *Server) logout(w http.ResponseWriter, r *http.Request) {
	if !sameOrigin(r) {
		http.Error(w, "cross-origin sign-out refused", http.StatusForbidden)
		return
	}
	setTokenCookie(w, "", -1)
	http.Redirect(w, r, Path, http.StatusSeeOther)
}

// sameOrigin refuses a form another site posts: browsers send Origin on every POST.
func sameOrigin(r *http.Request) bool {
	o := r.Header.Get("Origin")
	if o == "" {
		return true
	}
	u, err := url.Parse(o)
	return err == nil && u.Host == r.Host
}

func (s *Server) authorized(w http.ResponseWriter, r *http.Request) bool {
	v := s.check(r.Context(), tokenOf(r))
	if v.status != http.StatusOK {
		http.Error(w, v.reason, v.status)
		return false
	}
	return true
}

func (s *Server) view(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(w, r) {
		return
	}
	m, _ := s.board.Current()
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(m.View(ParseQuery(r.URL.Query())))
}

// events streams the page's view: at once, then whenever the model changes it differently. The
// token is reviewed again at each change (the answer is cached), so a revoked permission ends
// the stream.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(w, r) {
		return
	}
	flusher, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	q, token := ParseQuery(r.URL.Query()), tokenOf(r)
	beat := time.NewTicker(heartbeat)
	defer beat.Stop()
	var last []byte
	for {
		m, changed := s.board.Current()
		b, err := json.Marshal(m.View(q))
		if err != nil {
			return
		}
		if !bytes.Equal(b, last) {
			if _, err := fmt.Fprintf(w, "event: view\ndata: %s\n\n", b); err != nil {
				return
			}
			flusher.Flush()
			last = b
		}
		select {
		case <-r.Context().Done():
			return
		case <-s.board.stopped:
			return
		case <-beat.C:
			if _, err := fmt.Fprint(w, ": keep-alive\n\n"); err != nil {
				return
			}
			flusher.Flush()
		case <-changed:
		}
		if v := s.check(r.Context(), token); v.status != http.StatusOK {
			b, _ := json.Marshal(v.reason)
			fmt.Fprintf(w, "event: denied\ndata: %s\n\n", b)
			flusher.Flush()
			return
		}
	}
}
