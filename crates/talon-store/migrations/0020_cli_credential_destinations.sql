-- Talon schema v20: where a credentialed binary's credentials may be sent (issue 35). A JSON list
-- of `host[:port][/path]` or `*.domain`; empty means the binary's preset defaults. A command that
-- would send the credentials anywhere else is refused before it runs.
ALTER TABLE cli_credentials ADD COLUMN destinations TEXT NOT NULL DEFAULT '[]';
