package links

// Hooks for the external tests, which stage races the public API cannot
// order.

// Queued is how many creates wait in s's coalescer for a shared write.
func Queued(s *Service) int { return s.co.queued() }

func (c *coalescer) queued() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.pending)
}
