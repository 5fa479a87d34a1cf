-- @sqlite
-- Talon schema v1 (SQLite). Times are Unix milliseconds.
-- @postgres
-- Talon schema v1 (PostgreSQL). Times are Unix milliseconds. Integers are BIGINT so one Rust type
-- (i64) reads both engines.
-- @end
CREATE TABLE agents (
    key TEXT PRIMARY KEY,
    agent_type TEXT NOT NULL CHECK (agent_type IN ('open', 'predefined')),
    settings TEXT NOT NULL DEFAULT '{}',
    created_at {{bigint}} NOT NULL,
    updated_at {{bigint}} NOT NULL
);

CREATE TABLE users (
    id TEXT PRIMARY KEY,
    display_name TEXT,
    created_at {{bigint}} NOT NULL
);

CREATE TABLE agent_context_files (
    agent_key TEXT NOT NULL REFERENCES agents(key) ON DELETE CASCADE,
    file_name TEXT NOT NULL,
    content TEXT NOT NULL,
    updated_at {{bigint}} NOT NULL,
    PRIMARY KEY (agent_key, file_name)
);

CREATE TABLE user_context_files (
    agent_key TEXT NOT NULL REFERENCES agents(key) ON DELETE CASCADE,
    user_id TEXT NOT NULL,
    file_name TEXT NOT NULL,
    content TEXT NOT NULL,
    updated_at {{bigint}} NOT NULL,
    PRIMARY KEY (agent_key, user_id, file_name)
);

CREATE TABLE memory_documents (
    id {{serial_pk}},
    agent_key TEXT NOT NULL,
    user_id TEXT NOT NULL DEFAULT '',
    path TEXT NOT NULL,
    content TEXT NOT NULL,
    version {{bigint}} NOT NULL DEFAULT 1,
    updated_at {{bigint}} NOT NULL,
    UNIQUE (agent_key, user_id, path)
);

CREATE TABLE memory_chunks (
    id {{serial_pk}},
    document_id {{bigint}} NOT NULL REFERENCES memory_documents(id) ON DELETE CASCADE,
    chunk_index {{bigint}} NOT NULL,
    start_line {{bigint}} NOT NULL,
    end_line {{bigint}} NOT NULL,
-- @sqlite
    content TEXT NOT NULL
-- @postgres
    content TEXT NOT NULL,
    tsv TSVECTOR GENERATED ALWAYS AS (to_tsvector('simple', content)) STORED
-- @end
);
CREATE INDEX memory_chunks_document ON memory_chunks (document_id);
-- @sqlite

CREATE VIRTUAL TABLE memory_chunks_fts USING fts5 (content, content = 'memory_chunks', content_rowid = 'id');
CREATE TRIGGER memory_chunks_ai AFTER INSERT ON memory_chunks BEGIN
    INSERT INTO memory_chunks_fts (rowid, content) VALUES (new.id, new.content);
END;
CREATE TRIGGER memory_chunks_ad AFTER DELETE ON memory_chunks BEGIN
    INSERT INTO memory_chunks_fts (memory_chunks_fts, rowid, content) VALUES ('delete', old.id, old.content);
END;
-- @postgres
CREATE INDEX memory_chunks_tsv ON memory_chunks USING GIN (tsv);
-- @end

CREATE TABLE audit_log (
    id {{serial_pk}},
    tool TEXT NOT NULL,
    session_key TEXT NOT NULL,
    agent_key TEXT,
    user_id TEXT,
    args_digest TEXT NOT NULL,
    is_error {{bigint}} NOT NULL,
    duration_us {{bigint}} NOT NULL,
    stage TEXT,
    created_at {{bigint}} NOT NULL
);
CREATE INDEX audit_log_session ON audit_log (session_key, created_at);

CREATE TABLE secrets (
    name TEXT PRIMARY KEY,
    nonce {{blob}} NOT NULL,
    ciphertext {{blob}} NOT NULL,
    updated_at {{bigint}} NOT NULL
);

CREATE TABLE talon_meta (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
