"""The load generator's HTTP client: its own HTTP/1.1 connections for plain HTTP, aiohttp for TLS
and proxies, and the SSE scanner."""
