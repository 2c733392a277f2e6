package discovery

import (
	"sync"
)

// connections counts the connections served, in all and by client
// address.
type connections struct {
	mu             sync.Mutex
	max, perClient int
	n              int
	by             map[string]int
	// told is the last refusal logged: one line per kind of refusal in a
	// row, not one per connection.
	told string
}

// take counts a connection of client, or says why it is refused.
func (c *connections) take(client string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.n >= c.max:
		return "the endpoint serves its most connections at once"
	case c.by[client] >= c.perClient:
		return "a client has its most connections at once"
	}
	c.n++
	c.by[client]++
	c.told = ""
	return ""
}

func (c *connections) give(client string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n--
	if c.by[client]--; c.by[client] <= 0 {
		delete(c.by, client)
	}
}
