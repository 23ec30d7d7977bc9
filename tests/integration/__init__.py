"""A real `attnmt serve` on free loopback ports, called as users call it."""
