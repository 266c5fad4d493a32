package engine

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/open-policy-agent/opa/v1/ast"
)

// A Rego policy is tenant code: it runs inside the policy server's pod, on its network and with
// its environment. So built-ins are served from an allow-list of pure functions (what
// Kubewarden's Rego runtime offers, and Gatekeeper with http.send disabled, its default) rather
// than everything OPA has: a built-in added to a future OPA is refused until it is looked at.

// pureBuiltins compute only from their arguments (and the clock or a random source), into a
// result whose size their arguments bound (see opa_builtin_guards.go for the two checked).
var pureBuiltins = setOf(
	// operators and internals the compiler emits
	"eq", "equal", "neq", "lt", "lte", "gt", "gte", "assign", "plus", "minus", "mul", "div", "rem",
	"and", "or", "internal.member_2", "internal.member_3", "internal.print", "internal.template_string", "print",
	// numbers, aggregates, types
	"abs", "ceil", "floor", "round", "count", "sum", "product", "max", "min", "sort", "all", "any",
	"numbers.range", "rand.intn", "to_number", "format_int",
	"bits.and", "bits.lsh", "bits.negate", "bits.or", "bits.rsh", "bits.xor",
	"is_array", "is_boolean", "is_null", "is_number", "is_object", "is_set", "is_string", "type_name",
	"cast_array", "cast_boolean", "cast_null", "cast_object", "cast_set", "cast_string",
	// collections
	"array.concat", "array.flatten", "array.reverse", "array.slice", "intersection", "union", "set_diff",
	"object.filter", "object.get", "object.keys", "object.remove", "object.subset", "object.union", "object.union_n",
	"json.filter", "json.remove", "json.patch", "walk", "graph.reachable",
	// strings and regular expressions (RE2: linear time)
	"concat", "contains", "endswith", "startswith", "indexof", "indexof_n", "lower", "upper", "replace",
	"split", "sprintf", "substring", "trim", "trim_left", "trim_prefix", "trim_right", "trim_space", "trim_suffix",
	"strings.any_prefix_match", "strings.any_suffix_match", "strings.count",
	"strings.replace_n", "strings.reverse", "strings.split_n",
	"re_match", "regex.find_all_string_submatch_n", "regex.find_n", "regex.globs_match", "regex.is_valid",
	"regex.match", "regex.replace", "regex.split", "regex.template_match", "glob.match", "glob.quote_meta",
	// encodings
	"base64.decode", "base64.encode", "base64.is_valid", "base64url.decode", "base64url.encode",
	"base64url.encode_no_pad", "hex.decode", "hex.encode", "json.is_valid", "json.marshal", "json.unmarshal", "yaml.is_valid", "yaml.marshal", "yaml.unmarshal",
	"urlquery.decode", "urlquery.decode_object", "urlquery.encode", "urlquery.encode_object",
	"uri.is_valid", "uri.parse", "units.parse", "units.parse_bytes", "semver.compare", "semver.is_valid",
	"uuid.parse", "uuid.rfc4122", "graphql.is_valid", "graphql.parse", "graphql.parse_and_verify",
	"graphql.parse_query", "graphql.parse_schema", "graphql.schema_is_valid",
	// CIDR arithmetic: no lookups
	"net.cidr_contains", "net.cidr_contains_matches", "net.cidr_expand", "net.cidr_intersects",
	"net.cidr_is_valid", "net.cidr_merge", "net.cidr_overlap",
	// time
	"time.add_date", "time.clock", "time.date", "time.diff", "time.format", "time.now_ns",
	"time.parse_duration_ns", "time.parse_ns", "time.parse_rfc3339_ns", "time.weekday",
	// cryptography over the arguments (keys and certificates are passed in, nothing is fetched)
	"crypto.hmac.equal", "crypto.hmac.md5", "crypto.hmac.sha1", "crypto.hmac.sha256", "crypto.hmac.sha512",
	"crypto.md5", "crypto.sha1", "crypto.sha256", "crypto.parse_private_keys",
	"crypto.x509.parse_and_verify_certificates", "crypto.x509.parse_and_verify_certificates_with_options",
	"crypto.x509.parse_certificate_request", "crypto.x509.parse_certificates", "crypto.x509.parse_keypair",
	"crypto.x509.parse_rsa_private_key", "providers.aws.sign_req",
	"io.jwt.decode", "io.jwt.decode_verify", "io.jwt.encode_sign", "io.jwt.encode_sign_raw",
	"io.jwt.verify_eddsa", "io.jwt.verify_es256", "io.jwt.verify_es384", "io.jwt.verify_es512",
	"io.jwt.verify_hs256", "io.jwt.verify_hs384", "io.jwt.verify_hs512", "io.jwt.verify_ps256",
	"io.jwt.verify_ps384", "io.jwt.verify_ps512", "io.jwt.verify_rs256", "io.jwt.verify_rs384", "io.jwt.verify_rs512",
	// the policy's own source
	"rego.metadata.chain", "rego.metadata.rule", "rego.parse_module", "trace",
)

// networkBuiltins reach beyond the pod's sandbox: a tenant could read cloud metadata or an
// internal service and return it as its denial message. Only a ClusterAdmissionPolicy that says
// allowNetworkBuiltins gets them. The JSON-schema built-ins are here because a schema's $ref may
// name an http:// or file:// document, which OPA loads.
var networkBuiltins = setOf("http.send", "net.lookup_ip_addr", "json.match_schema", "json.verify_schema")

// refusedBecause says why a built-in outside the allow-list is refused, for the load error.
func refusedBecause(name string, allowNetwork bool) string {
	switch {
	case networkBuiltins[name] && !allowNetwork:
		return "it reaches the network; only a ClusterAdmissionPolicy with spec.allowNetworkBuiltins may use it"
	case name == "opa.runtime":
		return "it exposes the policy server's environment and configuration"
	}
	return "it is not on the policy server's allow-list of pure built-ins with bounded results"
}

func builtinAllowed(name string, allowNetwork bool) bool {
	return pureBuiltins[name] || (allowNetwork && networkBuiltins[name])
}

// checkBuiltins refuses a module that imports a built-in outside the allow-list; names are the
// keys of the module's `builtins` export, which lists every built-in it calls on the host.
func checkBuiltins(names []string, allowNetwork bool) error {
	var refused []string
	for _, name := range names {
		if !builtinAllowed(name, allowNetwork) {
			refused = append(refused, fmt.Sprintf("%q (%s)", name, refusedBecause(name, allowNetwork)))
		}
	}
	if len(refused) == 0 {
		return nil
	}
	slices.Sort(refused)
	return fmt.Errorf("policy uses built-in %s", strings.Join(refused, ", "))
}

// regoCapabilities are what CompileRego lets Rego call: the allow-list with the network
// built-ins, since whether a policy may use those is decided when it is loaded. Anything else
// fails to compile with OPA's own error, which names the function.
var regoCapabilities = sync.OnceValue(func() *ast.Capabilities {
	caps := ast.CapabilitiesForThisVersion()
	kept := caps.Builtins[:0:0]
	for _, b := range caps.Builtins {
		if builtinAllowed(b.Name, true) {
			kept = append(kept, b)
		}
	}
	caps.Builtins = kept
	return caps
})

func setOf(names ...string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}
