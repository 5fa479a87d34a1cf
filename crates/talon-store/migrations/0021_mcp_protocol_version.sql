-- Talon schema v21 (issue 35).
-- The MCP protocol version a streamable HTTP server is spoken to with (`[mcp_servers.x]
-- protocol_version`); empty means `auto`: `initialize`, then `server/discover` when the server refuses it.
ALTER TABLE mcp_servers ADD COLUMN protocol_version TEXT NOT NULL DEFAULT '';
