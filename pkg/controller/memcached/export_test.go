package memcached

// For the tests on a real cluster, in package memcached_test.
var (
	AppliesNothing = appliesNothing
	OwnsExactly    = ownsExactly
)
