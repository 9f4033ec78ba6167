"""The load generator's HTTP client: one keep-alive HTTP/1.1 connection, the pool, SSE."""
