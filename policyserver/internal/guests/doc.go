// Package guests builds the test policies checked in as Go source under
// policyserver/testdata/guests into wasm, for tests and the benchmark. A build is cached under the
// user's cache directory keyed by the sources, the toolchain and the build mode, so only the first
// run pays for it.
package guests
