package policyserver

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"sync"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/functions"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"

	"regent.dev/regent/policyserver/engine"
)

// evaluator is what the server evaluates a request with: a policy's module, or a group of them.
type evaluator interface {
	Validate(ctx context.Context, request []byte) (engine.Response, error)
	Spec() engine.Spec
	Close()
}

// groupCauseField is where a rejecting member's message goes in the denial's causes, as in
// Kubewarden: `spec.policies.<member>`.
const groupCauseField = "spec.policies."

// CompileGroupExpression checks a group's expression as the policy server will run it: each
// member a function of no arguments returning bool, the whole a bool. The leader calls it when
// it prepares a group's revision, so a bad expression is the revision's condition before any
// replica tries to load it.
func CompileGroupExpression(expression string, members []string) error {
	_, _, err := checkGroupExpression(expression, members)
	return err
}

func checkGroupExpression(expression string, members []string) (*cel.Env, *cel.Ast, error) {
	opts := make([]cel.EnvOption, 0, len(members))
	for _, m := range members {
		opts = append(opts, cel.Function(m, cel.Overload(m+"_bool", nil, cel.BoolType)))
	}
	env, err := cel.NewEnv(opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("expression environment: %w", err)
	}
	ast, iss := env.Compile(expression)
	if iss.Err() != nil {
		return nil, nil, fmt.Errorf("expression %q: compilation failed: %w", expression, iss.Err())
	}
	if ast.OutputType() != cel.BoolType {
		return nil, nil, fmt.Errorf("expression %q: must evaluate to bool, not %s", expression, ast.OutputType())
	}
	return env, ast, nil
}

// policyGroup evaluates its members as its expression calls them (a member the expression does
// not reach, as in `a() || b()` when a() holds, is not evaluated) and accepts when the expression
// is true. A rejection carries the group's message, each rejecting member's message as a cause.
type policyGroup struct {
	name    string
	message string
	members map[string]*engine.Policy
	names   []string // sorted, so causes come in a stable order
	env     *cel.Env
	ast     *cel.Ast
}

func newPolicyGroup(name, expression, message string, members map[string]*engine.Policy) (*policyGroup, error) {
	names := make([]string, 0, len(members))
	for n := range members {
		names = append(names, n)
	}
	sort.Strings(names)
	env, ast, err := checkGroupExpression(expression, names)
	if err != nil {
		return nil, err
	}
	return &policyGroup{name: name, message: message, members: members, names: names, env: env, ast: ast}, nil
}

// memberResult is one member's verdict on one request.
type memberResult struct {
	resp engine.Response
	err  error
}

func (g *policyGroup) Validate(ctx context.Context, request []byte) (engine.Response, error) {
	var mu sync.Mutex
	results := map[string]memberResult{}
	// The checked expression is kept; only the member functions, bound to this request, are
	// planned per evaluation.
	impls := make([]*functions.Overload, 0, 2*len(g.names))
	for _, n := range g.names {
		member, name := g.members[n], n
		call := func(...ref.Val) ref.Val {
			resp, err := member.Validate(ctx, request)
			mu.Lock()
			results[name] = memberResult{resp, err}
			mu.Unlock()
			if err != nil {
				return types.NewErr("policy %s: %v", name, err)
			}
			return types.Bool(resp.Accepted)
		}
		impls = append(impls, &functions.Overload{Operator: name, Function: call},
			&functions.Overload{Operator: name + "_bool", Function: call})
	}
	prg, err := g.env.Program(g.ast, cel.Functions(impls...))
	if err != nil {
		return engine.Response{}, fmt.Errorf("group %s: %w", g.name, err)
	}
	out, _, err := prg.ContextEval(ctx, map[string]any{})
	if err != nil {
		return engine.Response{Accepted: false, Code: http.StatusInternalServerError,
			Message: fmt.Sprintf("error evaluating policy group expression: %v", err)}, nil
	}
	allowed, ok := out.Value().(bool)
	if !ok {
		return engine.Response{}, fmt.Errorf("group %s: expression gave %v, not a bool", g.name, out.Value())
	}
	if allowed {
		return engine.Response{Accepted: true}, nil
	}
	resp := engine.Response{Accepted: false, Message: g.message}
	for _, n := range g.names {
		r, ok := results[n]
		switch {
		case !ok:
		case r.err != nil:
			resp.Causes = append(resp.Causes, engine.Cause{Field: groupCauseField + n, Message: r.err.Error()})
		case !r.resp.Accepted:
			resp.Causes = append(resp.Causes, engine.Cause{Field: groupCauseField + n, Message: r.resp.Message})
			resp.Warnings = append(resp.Warnings, r.resp.Warnings...)
		}
	}
	return resp, nil
}

// Spec describes the group as one policy: validating only, as Kubewarden's groups are.
func (g *policyGroup) Spec() engine.Spec {
	return engine.Spec{Name: g.name, ExecutionMode: "group"}
}

func (g *policyGroup) Close() {
	for _, m := range g.members {
		m.Close()
	}
}

// loadGroup loads every member of a group as a policy of its own (named `<group>/<member>` in the
// engine) and the expression over them; a member that fails to load fails the group.
func (s *Server) loadGroup(ctx context.Context, name string, pc PolicyConfig) (*policyGroup, error) {
	if pc.Expression == "" || len(pc.Policies) == 0 || pc.Message == "" {
		return nil, fmt.Errorf("a policy group needs policies, an expression and a message")
	}
	members := map[string]*engine.Policy{}
	closeAll := func() {
		for _, m := range members {
			m.Close()
		}
	}
	for _, m := range sortedNames(pc.Policies) {
		mc := pc.Policies[m]
		if mc.isGroup() {
			closeAll()
			return nil, fmt.Errorf("member %s: a group member cannot be a group", m)
		}
		if mc.TimeoutSeconds == 0 && mc.TimeoutEvalSeconds == 0 {
			mc.TimeoutSeconds = pc.TimeoutSeconds
		}
		spec, err := mc.spec(ctx, name+"/"+m)
		if err != nil {
			closeAll()
			return nil, fmt.Errorf("member %s: %w", m, err)
		}
		spec.Mutating = false // groups validate only, as in Kubewarden
		p, err := s.engine.Load(ctx, spec)
		if err != nil {
			closeAll()
			return nil, fmt.Errorf("member %s: %w", m, err)
		}
		members[m] = p
	}
	g, err := newPolicyGroup(name, pc.Expression, pc.Message, members)
	if err != nil {
		closeAll()
		return nil, err
	}
	return g, nil
}

func sortedNames[T any](m map[string]T) []string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
