package engine

import (
	"fmt"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/topdown"
)

// Built-ins served on the host build their results in the host's memory, outside the guest's
// limit, and a running Go built-in can't be interrupted. Arguments and results are bounded by
// the output limit (opaBuiltins.call); the two allowed built-ins whose result can be far larger
// than their arguments are checked before they run, so the host never builds it. Built-ins whose
// result can grow without such a simple bound (strings.render_template, numbers.range_step,
// graph.reachable_paths, json.marshal_with_options) are not on the allow-list at all.

// maxFormatPadding bounds sprintf's widths and precisions: a message needs a few columns of
// padding, while %999999d turns one number into a megabyte.
const maxFormatPadding = 1024

func guardBuiltin(name string, f topdown.BuiltinFunc, limit uint64) topdown.BuiltinFunc {
	switch name {
	case "sprintf":
		return func(bctx topdown.BuiltinContext, args []*ast.Term, iter func(*ast.Term) error) error {
			if s, ok := args[0].Value.(ast.String); ok {
				if err := checkFormat(string(s)); err != nil {
					panic(fmt.Errorf("built-in sprintf: %w", err))
				}
			}
			return f(bctx, args, iter)
		}
	case "regex.replace":
		// Every match (at most one per position) becomes the replacement, whose $n references
		// add at most the input once each: that bounds the result.
		return func(bctx topdown.BuiltinContext, args []*ast.Term, iter func(*ast.Term) error) error {
			s, ok1 := args[0].Value.(ast.String)
			repl, ok2 := args[2].Value.(ast.String)
			if ok1 && ok2 {
				checkOutput("regex.replace result", (2*uint64(len(repl))+1)*(uint64(len(s))+1), limit)
			}
			return f(bctx, args, iter)
		}
	}
	return f
}

// checkFormat refuses a Go format whose width or precision is over maxFormatPadding or taken
// from an argument (*), which could be anything.
func checkFormat(format string) error {
	for i := 0; i < len(format); i++ {
		if format[i] != '%' {
			continue
		}
		for i++; i < len(format); i++ {
			c := format[i]
			switch {
			case c == '*':
				return fmt.Errorf("a width or precision taken from an argument (*) is not allowed")
			case c >= '0' && c <= '9':
				n := 0
				for ; i < len(format) && format[i] >= '0' && format[i] <= '9'; i++ {
					if n = n*10 + int(format[i]-'0'); n > maxFormatPadding {
						return fmt.Errorf("width or precision over %d", maxFormatPadding)
					}
				}
				i--
			case c == '+' || c == '-' || c == '#' || c == ' ' || c == '.' || c == '[' || c == ']':
			default:
				goto verbDone // the verb (or %%) ends the directive
			}
		}
	verbDone:
	}
	return nil
}
