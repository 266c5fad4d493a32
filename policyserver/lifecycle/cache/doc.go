// Package cache is the policy server's signed module cache: one entry per compiled module and
// policy-server version, at <root>/<version>/<key>, where key is "sha256-<hex>" of the wasm the
// engine loads. An entry holds module.wasm, wazero's compiled machine code for it, and
// entry.json, a manifest naming every file with its sha256; every file is signed beside itself
// (<file>.sig). The root is a volume every replica shares, or each replica's own, which
// Receive fills from a stream WriteEntry wrote on the leader, verified in memory before a byte
// of it is written. The leader builds entries without ever reading the shared volume back: it
// compiles in a private directory, signs the bytes it holds in memory and publishes them by
// copy and rename. Replicas open entries only after verifying each file and that the module is
// the one the key names, copying the verified bytes into their private compilation cache, so a
// file swapped after the check is never run. A replica of another version finds no entry under
// its version and compiles for itself.
package cache
