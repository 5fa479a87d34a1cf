-- Talon schema v1 (PostgreSQL). Times are Unix milliseconds. Integers are BIGINT so one Rust type
-- (i64) reads both engines.
CREATE TABLE agents (
    key TEXT PRIMARY KEY,
    agent_type TEXT NOT NULL CHECK (agent_type IN ('open', 'predefined')),
    settings TEXT NOT NULL DEFAULT '{}',
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);

CREATE TABLE users (
    id TEXT PRIMARY KEY,
    display_name TEXT,
    created_at BIGINT NOT NULL
);

CREATE TABLE agent_context_files (
    agent_key TEXT NOT NULL REFERENCES agents(key) ON DELETE CASCADE,
    file_name TEXT NOT NULL,
    content TEXT NOT NULL,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (agent_key, file_name)
);

CREATE TABLE user_context_files (
    agent_key TEXT NOT NULL REFERENCES agents(key) ON DELETE CASCADE,
    user_id TEXT NOT NULL,
    file_name TEXT NOT NULL,
    content TEXT NOT NULL,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (agent_key, user_id, file_name)
);

CREATE TABLE memory_documents (
    id BIGSERIAL PRIMARY KEY,
    agent_key TEXT NOT NULL,
    user_id TEXT NOT NULL DEFAULT '',
    path TEXT NOT NULL,
    content TEXT NOT NULL,
    version BIGINT NOT NULL DEFAULT 1,
    updated_at BIGINT NOT NULL,
    UNIQUE (agent_key, user_id, path)
);

CREATE TABLE memory_chunks (
    id BIGSERIAL PRIMARY KEY,
    document_id BIGINT NOT NULL REFERENCES memory_documents(id) ON DELETE CASCADE,
    chunk_index BIGINT NOT NULL,
    start_line BIGINT NOT NULL,
    end_line BIGINT NOT NULL,
    content TEXT NOT NULL,
    tsv TSVECTOR GENERATED ALWAYS AS (to_tsvector('simple', content)) STORED
);
CREATE INDEX memory_chunks_document ON memory_chunks (document_id);
CREATE INDEX memory_chunks_tsv ON memory_chunks USING GIN (tsv);

CREATE TABLE audit_log (
    id BIGSERIAL PRIMARY KEY,
    tool TEXT NOT NULL,
    session_key TEXT NOT NULL,
    agent_key TEXT,
    user_id TEXT,
    args_digest TEXT NOT NULL,
    is_error BIGINT NOT NULL,
    duration_us BIGINT NOT NULL,
    stage TEXT,
    created_at BIGINT NOT NULL
);
CREATE INDEX audit_log_session ON audit_log (session_key, created_at);

CREATE TABLE secrets (
    name TEXT PRIMARY KEY,
    nonce BYTEA NOT NULL,
    ciphertext BYTEA NOT NULL,
    updated_at BIGINT NOT NULL
);

CREATE TABLE talon_meta (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
