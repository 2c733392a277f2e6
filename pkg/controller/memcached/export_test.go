package memcached

// For the tests in package memcached_test.
var EnqueueFreedName = enqueueFreedName

var FailedTest = failedTest
