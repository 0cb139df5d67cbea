package idgen

// DefaultRedisURL is the Redis the CLI connects to when none is given.
const DefaultRedisURL = "redis://127.0.0.1:6379/0"
