package opa

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/metrics"
	"github.com/open-policy-agent/opa/v1/server/types"
	"github.com/open-policy-agent/opa/v1/server/writer"
	"github.com/open-policy-agent/opa/v1/topdown"
	"github.com/open-policy-agent/opa/v1/topdown/lineage"
	"github.com/open-policy-agent/opa/v1/util"
	"github.com/open-policy-agent/opa/v1/util/decoding"
	"github.com/open-policy-agent/opa/v1/version"
)

// maxBody caps a query's request body, compressed and decompressed.
const maxBody = 8 << 20

// Handler serves OPA's data API (GET and POST /v1/data/<path>) from an engine. When auth is not
// nil every request needs a bearer token the hub accepts and may use for the path.
type Handler struct {
	Engine *Engine
	Auth   *Authorizer
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/data" && !strings.HasPrefix(r.URL.Path, "/v1/data/") {
		writer.Error(w, http.StatusNotFound, types.NewErrorV1(types.CodeResourceNotFound, "%s not found", r.URL.Path))
		return
	}
	// The data is the hub's inventory, replicated: PUT, PATCH and DELETE, which OPA's server has,
	// are refused here.
	if r.Method != http.MethodGet && r.Method != http.MethodPost {
		writer.Error(w, http.StatusMethodNotAllowed, types.NewErrorV1(types.CodeInvalidOperation, "method %s not allowed", r.Method))
		return
	}
	if h.Auth != nil && !h.authorize(w, r) {
		return
	}
	h.serveData(w, r)
}

// serveData answers GET and POST /v1/data/<path> the way OPA's server does, byte for byte: the
// same path reading, input parsing, query parameters (pretty, metrics, instrument, explain,
// provenance, strict-builtin-errors, rule_labels), response and error bodies, so a client cannot
// tell the two apart (TestDifferentialOPAServer holds them to it). What differs: no decision_id
// (OPA has one only with decision logging on), metrics are this server's timings, and provenance
// names the binary serving.
func (h *Handler) serveData(w http.ResponseWriter, r *http.Request) {
	params := r.URL.Query()
	flag := func(name string) bool { return boolParam(params, name) }
	instrument, pretty := flag(types.ParamInstrumentV1), flag(types.ParamPrettyV1)
	explain := explainMode(params)

	// As OPA, count only when the caller asked to see the counts.
	m := metrics.NoOp()
	withMetrics := flag(types.ParamMetricsV1) || instrument
	if withMetrics {
		m = metrics.New()
	}
	m.Timer(metrics.ServerHandler).Start()
	m.Timer(metrics.RegoInputParse).Start()
	var input ast.Value
	var missingInput bool
	var err error
	if r.Method == http.MethodPost {
		input, missingInput, err = postInput(w, r)
	} else if inputs := params[types.ParamInputV1]; len(inputs) > 0 {
		input, err = getInput(inputs[len(inputs)-1]) // the last one wins, as in OPA
	}
	if err != nil {
		writer.ErrorString(w, http.StatusBadRequest, types.CodeInvalidParameter, err)
		return
	}
	m.Timer(metrics.RegoInputParse).Stop()

	opts := QueryOptions{StrictBuiltinErrors: flag(types.ParamStrictBuiltinErrors), Instrument: instrument}
	if withMetrics {
		opts.Metrics = m
	}
	var trace *topdown.BufferTracer
	if explain != types.ExplainOffV1 {
		trace = topdown.NewBufferTracer()
		opts.Tracer = trace
	}
	if flag(types.ParamRuleLabelsV1) {
		opts.RuleLabels = &topdown.EvaluatedRuleTracker{}
	}
	result, defined, err := h.Engine.Eval(r.Context(), dataPath(r), input, opts)
	m.Timer(metrics.ServerHandler).Stop()
	if err != nil {
		// Path, evaluation and built-in errors answer with OPA's status, code and body.
		writer.ErrorAuto(w, err)
		return
	}

	var resp types.DataResponseV1
	if missingInput {
		// OPA answers without input but says the request was probably not meant that way.
		resp.Warning = types.NewWarning(types.CodeAPIUsageWarn, types.MsgInputKeyMissing)
	}
	if withMetrics {
		resp.Metrics = m.All()
	}
	if flag(types.ParamProvenanceV1) {
		// The engine's version, with the build of the binary serving; no bundles (policies come
		// from ConfigMaps), as OPA reports none without bundles.
		resp.Provenance = &types.ProvenanceV1{Version: version.Version, Vcs: version.Vcs, Timestamp: version.Timestamp, Hostname: version.Hostname}
	}
	if !defined {
		if explain == types.ExplainFullV1 {
			if resp.Explanation, err = types.NewTraceV1(lineage.Full(*trace), pretty); err != nil {
				writer.ErrorAuto(w, err)
				return
			}
		}
		writeResponse(w, &resp, pretty)
		return
	}
	resp.Result = &result
	if explain != types.ExplainOffV1 {
		resp.Explanation = explanation(explain, *trace, pretty)
	}
	if opts.RuleLabels != nil && len(opts.RuleLabels.Labels) > 0 {
		resp.RuleLabels = opts.RuleLabels.Labels
	}
	writeResponse(w, &resp, pretty)
}

// plainResponse is OPA's response without its MarshalJSON, which encodes the whole response once
// more to merge extra fields this server never sets; the encoder then had to validate and compact
// that output again. Encoding the fields directly writes the same bytes for a third of the work.
type plainResponse types.DataResponseV1

// writeResponse is OPA's writer.JSONOK for a response with no extra fields.
func writeResponse(w http.ResponseWriter, resp *types.DataResponseV1, pretty bool) {
	enc := json.NewEncoder(w)
	if pretty {
		enc.SetIndent("", "  ")
	}
	w.Header().Add("Content-Type", "application/json")
	if err := enc.Encode((*plainResponse)(resp)); err != nil {
		writer.ErrorAuto(w, err)
	}
}

// plainRequest is OPA's request body without its UnmarshalJSON, which decodes the body twice (the
// second time for extra fields, kept only for decision logs, which this server does not write).
type plainRequest types.DataRequestV1

// dataPath is OPA's reading of the path after /v1/data: split on "/" before unescaping (so %2F
// stays inside a key), empty segments skipped, a segment that does not unescape kept as it is.
func dataPath(r *http.Request) []string {
	var path []string
	for _, seg := range strings.Split(strings.TrimPrefix(r.URL.EscapedPath(), "/v1/data"), "/") {
		if seg == "" {
			continue
		}
		if p, err := url.PathUnescape(seg); err == nil {
			seg = p
		}
		path = append(path, seg)
	}
	return path
}

func getInput(raw string) (ast.Value, error) {
	var x any
	if err := util.UnmarshalJSON([]byte(raw), &x); err != nil {
		return nil, fmt.Errorf("parameter contains malformed input document: %w", err)
	}
	return ast.InterfaceToValue(x)
}

// postInput reads a POST body as OPA does: gzip when the Content-Encoding says so, YAML when the
// Content-Type does, JSON otherwise; an empty body or one without "input" is no input (missing is
// then true, for OPA's warning).
func postInput(w http.ResponseWriter, r *http.Request) (input ast.Value, missing bool, err error) {
	r = r.WithContext(decoding.AddServerDecodingGzipMaxLen(decoding.AddServerDecodingMaxLen(r.Context(), maxBody), maxBody))
	r.Body = http.MaxBytesReader(w, r.Body, maxBody)
	body, err := util.ReadMaybeCompressedBody(r)
	if err != nil {
		if _, ok := errors.AsType[*util.BodyTooLargeError](err); ok {
			return nil, false, err
		}
		return nil, false, fmt.Errorf("could not decompress the body: %w", err)
	}
	var req types.DataRequestV1
	if strings.Contains(r.Header.Get("Content-Type"), "yaml") {
		if len(body) > 0 {
			if err := util.Unmarshal(body, &req); err != nil {
				return nil, false, fmt.Errorf("body contains malformed input document: %w", err)
			}
		}
	} else if err := util.NewJSONDecoder(bytes.NewReader(body)).Decode((*plainRequest)(&req)); err != nil && err != io.EOF {
		// Decoded again as OPA does, for OPA's message (it names OPA's type).
		if err := util.NewJSONDecoder(bytes.NewReader(body)).Decode(&req); err != nil {
			return nil, false, fmt.Errorf("body contains malformed input document: %w", err)
		}
	}
	if req.Input == nil {
		return nil, true, nil
	}
	v, err := ast.InterfaceToValue(*req.Input)
	return v, false, err
}

// boolParam is OPA's reading of a switch: present without a value, or any value "true" (any case).
func boolParam(params url.Values, name string) bool {
	vs, ok := params[name]
	if !ok {
		return false
	}
	if len(vs) == 1 && vs[0] == "" {
		return true
	}
	for _, v := range vs {
		if strings.EqualFold(v, "true") {
			return true
		}
	}
	return false
}

// explainMode is the first explain value OPA knows; any other is off.
func explainMode(params url.Values) types.ExplainModeV1 {
	for _, v := range params[types.ParamExplainV1] {
		switch m := types.ExplainModeV1(v); m {
		case types.ExplainNotesV1, types.ExplainFailsV1, types.ExplainFullV1, types.ExplainDebugV1:
			return m
		}
	}
	return types.ExplainOffV1
}

// explanation renders a trace as OPA's ?explain= does; one that does not render is left out, as
// OPA leaves it out.
func explanation(mode types.ExplainModeV1, trace []*topdown.Event, pretty bool) types.TraceV1 {
	var events []*topdown.Event
	switch mode {
	case types.ExplainNotesV1:
		events = lineage.Notes(trace)
	case types.ExplainFailsV1:
		events = lineage.Fails(trace)
	case types.ExplainFullV1:
		events = lineage.Full(trace)
	case types.ExplainDebugV1:
		events = lineage.Debug(trace)
	}
	t, err := types.NewTraceV1(events, pretty)
	if err != nil {
		return nil
	}
	return t
}

func (h *Handler) authorize(w http.ResponseWriter, r *http.Request) bool {
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || strings.TrimSpace(token) == "" {
		writer.Error(w, http.StatusUnauthorized, types.NewErrorV1(types.CodeUnauthorized, "a bearer token is required"))
		return false
	}
	authn, allowed, reason, err := h.Auth.Authorize(r.Context(), strings.TrimSpace(token), strings.ToLower(r.Method), r.URL.Path)
	switch {
	case err != nil:
		writer.Error(w, http.StatusInternalServerError, types.NewErrorV1(types.CodeInternal, "authorize: %v", err))
	case !authn:
		writer.Error(w, http.StatusUnauthorized, types.NewErrorV1(types.CodeUnauthorized, "token not accepted by the hub: %s", reason))
	case !allowed:
		writer.Error(w, http.StatusForbidden, types.NewErrorV1("forbidden", "%s", reason))
	default:
		return true
	}
	return false
}
