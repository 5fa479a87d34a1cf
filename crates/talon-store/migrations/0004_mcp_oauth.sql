-- Talon schema v4: OAuth 2.1 sign-in for bridged MCP servers (streamable HTTP). The tokens
-- live in the encrypted secret 'mcp-oauth/<name>'; the client's secret, if any, in
-- 'mcp-server/<name>'.
ALTER TABLE mcp_servers ADD COLUMN oauth {{bigint}} NOT NULL DEFAULT 0;
ALTER TABLE mcp_servers ADD COLUMN oauth_client_id TEXT NOT NULL DEFAULT '';
ALTER TABLE mcp_servers ADD COLUMN oauth_client_metadata_url TEXT NOT NULL DEFAULT '';
ALTER TABLE mcp_servers ADD COLUMN oauth_scopes TEXT NOT NULL DEFAULT '[]';
