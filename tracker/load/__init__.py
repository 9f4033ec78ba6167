"""The load generator: its own HTTP/1.1 client, SSE scanning, request bodies, load shapes.

``http1`` (one keep-alive connection, stamped reads) → ``client`` (routes, proxies, the pool) →
``sse`` (what a stream carried) → ``generator`` (one load plan, timed). ``bodies`` builds the
requests, ``shapes`` and ``phases`` build the schedules, and ``summary``, ``slo`` and
``client_health`` judge what was measured.
"""
