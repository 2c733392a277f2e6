package discovery

// MaxLogin is the most bytes of a login the endpoint reads, for the
// tests of the package's users.
const MaxLogin = maxLogin
