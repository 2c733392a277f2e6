package owned

// For the tests in package owned_test, which also use package status (which
// imports this one).
var AppliedFields = appliedFields
