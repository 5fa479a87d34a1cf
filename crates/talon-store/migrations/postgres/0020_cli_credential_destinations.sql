-- Talon schema v20: where a credentialed binary's credentials may be sent (issue 35). A JSON list
-- of `host[:port][/path]` or `*.domain`; empty means the binary's preset defaults. A command that
-- would send the credentials anywhere else is refused before it runs.
ALTER TABLE cli_credentials ADD COLUMN destinations TEXT NOT NULL DEFAULT '[]';

-- The MCP protocol version a streamable HTTP server is spoken to with (`[mcp_servers.x]
-- protocol_version`); empty means `auto`: discover, then fall back to `initialize`.
ALTER TABLE mcp_servers ADD COLUMN protocol_version TEXT NOT NULL DEFAULT '';
