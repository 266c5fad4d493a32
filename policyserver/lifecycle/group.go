package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	kubewardenv1 "regent.dev/regent/api/kubewarden/v1"
	"regent.dev/regent/policyserver"
	"regent.dev/regent/policyserver/engine"
	"regent.dev/regent/policyserver/lifecycle/cache"
)

// A policy group's revision holds several modules, and the signed cache holds one module per
// entry: a group is prepared by the leader (every member pulled, compiled and its settings
// validated, the expression checked) and reported Initialized without a cache entry, so every
// replica compiles the members itself, as for a revision the leader could not sign.

// ReasonInvalidExpression: the group's expression does not compile over its members.
const ReasonInvalidExpression = "InvalidExpression"

// memberNames are the group's members, sorted.
func (r revision) memberNames() []string {
	names := make([]string, 0, len(r.group.Policies))
	for n := range r.group.Policies {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// member is the group's member n as a revision of its own, which prepare and compileSource
// take: its module, execution mode and settings, named `<group>/<member>`.
func (r revision) member(n string) revision {
	m := r.group.Policies[n]
	mr := r
	mr.group = nil
	mr.spec = kubewardenv1.PolicySpec{Module: m.Module, ExecutionMode: m.ExecutionMode, Settings: m.Settings,
		ContextAwareResources: m.ContextAwareResources}
	mr.key.Name = r.key.Name + "/" + n
	return mr
}

// prepareGroup is prepareRevision for a group: the digest names each member's module digest.
func (l *leader) prepareGroup(ctx context.Context, rev revision, pulled map[string]pullResult) (string, error) {
	var digests []string
	for _, n := range rev.memberNames() {
		mr := rev.member(n)
		res := pulled[n]
		if res.err != nil {
			return "", &stepError{ReasonPullError, fmt.Errorf("member %s: %w", n, res.err)}
		}
		src, err := compileSource(ctx, mr, res.module, l.privateDir, &l.sources)
		if err != nil {
			return "", fmt.Errorf("member %s: %w", n, err)
		}
		digests = append(digests, n+"="+src.ModuleDigest)
		spec := engine.Spec{Name: mr.key.Name, Module: src.Wasm, ExecutionMode: engine.ExecutionMode(src.ExecutionMode),
			Entrypoint: src.Entrypoint, ContextAwareResources: policyserver.EngineResources(mr.contextAwareResources())}
		if mr.spec.Settings != nil {
			spec.Settings = mr.spec.Settings.Raw
		}
		p, err := l.engine.Load(ctx, spec)
		if err != nil {
			reason := ReasonCompileError
			if errors.Is(err, engine.ErrInvalidSettings) {
				reason = ReasonInvalidSettings
			}
			return "", &stepError{reason, fmt.Errorf("member %s: %w", n, err)}
		}
		p.Close()
	}
	if err := policyserver.CompileGroupExpression(rev.group.Expression, rev.memberNames()); err != nil {
		return "", &stepError{ReasonInvalidExpression, err}
	}
	return strings.Join(digests, ","), nil
}

// groupConfig is what the server loads for a group's revision, each member's module compiled
// by this replica into its private directory.
func (r *replica) groupConfig(ctx context.Context, rev revision) (policyserver.PolicyConfig, []byte, error) {
	pc := rev.policyConfig("", "", "")
	pc.Message = rev.group.Message
	pc.Expression = rev.group.Expression
	pc.Policies = map[string]policyserver.PolicyConfig{}
	var all []byte
	for _, n := range rev.memberNames() {
		mr := rev.member(n)
		src, err := prepare(ctx, mr, r.opts.Pull, r.privateDir, nil)
		if err != nil {
			return pc, nil, fmt.Errorf("member %s: %w", n, err)
		}
		modPath := filepath.Join(r.privateDir, "modules", cache.Key(src.Wasm)+".wasm")
		if err := writeModule(modPath, src.Wasm); err != nil {
			return pc, nil, &stepError{ReasonLoadError, err}
		}
		all = append(all, src.Wasm...)
		mc := policyserver.PolicyConfig{Module: modPath, ExecutionMode: src.ExecutionMode, Entrypoint: src.Entrypoint,
			ContextAwareResources: mr.contextAwareResources()}
		if mr.spec.Settings != nil {
			mc.Settings = mr.spec.Settings.Raw
		}
		pc.Policies[n] = mc
	}
	return pc, all, nil
}

// loadGroup serves a group's revision; whatever fails is the replica's report, never an exit.
func (r *replica) loadGroup(ctx context.Context, rev revision, fail func(string, error)) bool {
	r.files.beginLoad()
	pc, all, err := r.groupConfig(ctx, rev)
	if err != nil {
		var se *stepError
		reason := ReasonLoadError
		if errors.As(err, &se) {
			reason = se.reason
		}
		fail(reason, err)
		return false
	}
	if err := r.server.LoadRevision(ctx, rev.key, pc); err != nil {
		fail(ReasonLoadError, err)
		return false
	}
	// The member modules and what their compilation added are this revision's files.
	r.files.loaded(rev.key, all, "", cache.Opened{})
	return true
}

// groupPulls are the leader's pulls of every member module of a group's revision (one pull per
// module, however many members share it); ok once all have ended. Results already handed over
// while others still run are given back, for the pass their end brings.
func (l *leader) groupPulls(ctx context.Context, rev revision, wanted map[pullKey]bool) (map[string]pullResult, bool) {
	byModule := map[string]pullResult{}
	done := true
	for _, n := range rev.memberNames() {
		k := pullKey{uid: rev.UID, module: rev.group.Policies[n].Module}
		wanted[k] = true
		if _, ok := byModule[k.module]; ok {
			continue
		}
		res, ok := l.pulls.get(ctx, k)
		if !ok {
			done = false
			continue
		}
		byModule[k.module] = res
	}
	if !done {
		for module, res := range byModule {
			l.pulls.giveBack(pullKey{uid: rev.UID, module: module}, res)
		}
		return nil, false
	}
	out := map[string]pullResult{}
	for _, n := range rev.memberNames() {
		out[n] = byModule[rev.group.Policies[n].Module]
	}
	return out, true
}

// syncGroup prepares a group's revision once all its members are pulled.
func (l *leader) syncGroup(ctx context.Context, rev revision, wanted map[pullKey]bool) {
	if !l.needsInit(rev, false) {
		return
	}
	pulled, ok := l.groupPulls(ctx, rev, wanted)
	if !ok {
		return // still pulling; the pulls' end brings another pass
	}
	_, reported := l.initialize(ctx, rev, func() (string, string, error) {
		digest, err := l.prepareGroup(ctx, rev, pulled)
		return digest, "", err
	}, func(digest string) string {
		return fmt.Sprintf("members %s compiled, settings valid, expression checked; a policy group has no signed "+
			"cache entry: every replica compiles its members", digest)
	})
	if reported {
		l.prepared[rev.UID] = ""
	}
}
