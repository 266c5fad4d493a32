package opa

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/server/types"
	"github.com/open-policy-agent/opa/v1/server/writer"
	"github.com/open-policy-agent/opa/v1/util"
)

// maxBody caps a query's request body.
const maxBody = 8 << 20

// Handler serves OPA's data API (GET and POST /v1/data/<path>) from an engine. When auth is not
// nil every request needs a bearer token the hub accepts and may use for the path.
type Handler struct {
	Engine *Engine
	Auth   *Authorizer
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/data" && !strings.HasPrefix(r.URL.Path, "/v1/data/") {
		writeError(w, http.StatusNotFound, types.NewErrorV1(types.CodeResourceNotFound, "%s not found", r.URL.Path))
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodPost {
		writeError(w, http.StatusMethodNotAllowed, types.NewErrorV1(types.CodeInvalidOperation, "method %s not allowed", r.Method))
		return
	}
	if h.Auth != nil && !h.authorize(w, r) {
		return
	}
	// Split the escaped path, then unescape each segment: %2F belongs to a key, as in OPA.
	var path []string
	if rest := strings.Trim(strings.TrimPrefix(r.URL.EscapedPath(), "/v1/data"), "/"); rest != "" {
		for _, seg := range strings.Split(rest, "/") {
			p, err := url.PathUnescape(seg)
			if err != nil {
				writeError(w, http.StatusBadRequest, types.NewErrorV1(types.CodeInvalidParameter, "path segment %q: %v", seg, err))
				return
			}
			path = append(path, p)
		}
	}

	var input any
	var warning *types.Warning
	switch r.Method {
	case http.MethodPost:
		body, err := io.ReadAll(io.LimitReader(r.Body, maxBody))
		if err != nil {
			writeError(w, http.StatusBadRequest, types.NewErrorV1(types.CodeInvalidParameter, "read body: %v", err))
			return
		}
		var req struct {
			Input *any `json:"input"`
		}
		if len(body) > 0 {
			if err := util.UnmarshalJSON(body, &req); err != nil {
				writeError(w, http.StatusBadRequest, types.NewErrorV1(types.CodeInvalidParameter, "body contains malformed input document: %v", err))
				return
			}
		}
		if req.Input == nil {
			// OPA answers without input but says the request was probably not meant that way.
			warning = types.NewWarning(types.CodeAPIUsageWarn, types.MsgInputKeyMissing)
		} else {
			input = *req.Input
		}
	case http.MethodGet:
		if raw := r.URL.Query().Get("input"); raw != "" {
			if err := util.UnmarshalJSON([]byte(raw), &input); err != nil {
				writeError(w, http.StatusBadRequest, types.NewErrorV1(types.CodeInvalidParameter, "input parameter: %v", err))
				return
			}
		}
	}

	result, defined, err := h.Engine.Query(r.Context(), path, input)
	if err != nil {
		var aerrs ast.Errors
		if errors.As(err, &aerrs) {
			writeError(w, http.StatusBadRequest, types.NewErrorV1(types.CodeInvalidParameter, types.MsgCompileQueryError).WithASTErrors(aerrs))
			return
		}
		// Evaluation errors (a conflict between rules, a built-in failing) answer exactly as OPA's
		// server does.
		writer.ErrorAuto(w, err)
		return
	}
	resp := map[string]any{}
	if defined {
		resp["result"] = result
	}
	if warning != nil {
		resp["warning"] = warning
	}
	writeJSON(w, http.StatusOK, resp)
}

func (h *Handler) authorize(w http.ResponseWriter, r *http.Request) bool {
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || strings.TrimSpace(token) == "" {
		writeError(w, http.StatusUnauthorized, types.NewErrorV1(types.CodeUnauthorized, "a bearer token is required"))
		return false
	}
	authn, allowed, reason, err := h.Auth.Authorize(r.Context(), strings.TrimSpace(token), strings.ToLower(r.Method), r.URL.Path)
	switch {
	case err != nil:
		writeError(w, http.StatusInternalServerError, types.NewErrorV1(types.CodeInternal, "authorize: %v", err))
	case !authn:
		writeError(w, http.StatusUnauthorized, types.NewErrorV1(types.CodeUnauthorized, "token not accepted by the hub: %s", reason))
	case !allowed:
		writeError(w, http.StatusForbidden, types.NewErrorV1("forbidden", "%s", reason))
	default:
		return true
	}
	return false
}

func writeError(w http.ResponseWriter, status int, e *types.ErrorV1) {
	writeJSON(w, status, e)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		body = []byte(fmt.Sprintf(`{"code":%q,"message":%q}`, types.CodeInternal, err.Error()))
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
