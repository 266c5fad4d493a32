package main

import (
	"github.com/spf13/pflag"
)

// deprecatedAlias keeps an old flag name working for scripts and manifests written against it,
// bound to the same variable as the flag that replaced it, hidden from help and warning on use.
func deprecatedAlias(f *pflag.FlagSet, old, current string) {
	flag := f.Lookup(current)
	if flag == nil {
		panic("deprecatedAlias: no flag --" + current)
	}
	f.Var(flag.Value, old, flag.Usage)
	_ = f.MarkDeprecated(old, "use --"+current)
}
