# A policy that never finishes in practice: 900 million comparisons that all fail (a number is
# never the request's uid, a string). It exists to
# show that an evaluation is stopped at its deadline.
package policy

r := numbers.range(1, 30000)

n := count([1 | some x in r; some y in r; x == input.request.uid])

main := {"response": {"allowed": n == 0}}
