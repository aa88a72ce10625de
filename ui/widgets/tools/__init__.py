"""A chat's tools: the bar asking to approve a call, and Settings → Tools (the MCP servers,
added by hand or imported from JSON, and the limits of a chat's tool calls)."""
