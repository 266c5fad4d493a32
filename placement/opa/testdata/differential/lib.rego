package placement.lib

arr := [10, 20, 30]

obj := {"a/b": 1, "1.0": "one-dot-zero", "with space": 2, "html": "<a&b>"}

set := {"x", "y", "z"}

big := 123456789012345678901234567890

half := 0.5

double(x) := 2 * x

four := double(2)

# A failing built-in: undefined by default, an error with ?strict-builtin-errors.
number := to_number(input.n)

# Two different values for one complete rule: OPA's eval_conflict_error.
conflict := 1 if input.conflict
conflict := 2 if input.conflict

meta := rego.metadata.rule()

chain := [a.path | some a in rego.metadata.chain()]

greeting := sprintf("hello %s", [input.name])

# METADATA
# labels:
#   severity: high
high if input.high
