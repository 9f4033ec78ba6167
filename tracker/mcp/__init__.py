"""`tracker mcp`: a Model Context Protocol server over the store (docs/mcp.md)."""
