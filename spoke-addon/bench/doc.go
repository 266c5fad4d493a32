// Package bench measures one spoke addon's policy side at scale: hundreds of policies whose
// ConfigurationPolicies cover thousands of objects, evaluated by templatesync and the
// ConfigurationPolicy controller running in a child process of their own, so its peak RSS, its
// requests and the watches it opens on the apiserver are its own. The benchmark lives in the test
// files; this package has no code of its own.
package bench
