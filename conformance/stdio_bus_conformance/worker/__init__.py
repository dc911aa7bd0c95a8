"""Worker mode: spawn a worker (or MCP stdio server) under test, play its
daemon and client, read its output as raw JSON, and its preflight."""
