-- Talon schema v1 (SQLite). Times are Unix milliseconds.
CREATE TABLE agents (
    key TEXT PRIMARY KEY,
    agent_type TEXT NOT NULL CHECK (agent_type IN ('open', 'predefined')),
    settings TEXT NOT NULL DEFAULT '{}',
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
);

CREATE TABLE users (
    id TEXT PRIMARY KEY,
    display_name TEXT,
    created_at INTEGER NOT NULL
);

CREATE TABLE agent_context_files (
    agent_key TEXT NOT NULL REFERENCES agents(key) ON DELETE CASCADE,
    file_name TEXT NOT NULL,
    content TEXT NOT NULL,
    updated_at INTEGER NOT NULL,
    PRIMARY KEY (agent_key, file_name)
);

CREATE TABLE user_context_files (
    agent_key TEXT NOT NULL REFERENCES agents(key) ON DELETE CASCADE,
    user_id TEXT NOT NULL,
    file_name TEXT NOT NULL,
    content TEXT NOT NULL,
    updated_at INTEGER NOT NULL,
    PRIMARY KEY (agent_key, user_id, file_name)
);

CREATE TABLE memory_documents (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    agent_key TEXT NOT NULL,
    user_id TEXT NOT NULL DEFAULT '',
    path TEXT NOT NULL,
    content TEXT NOT NULL,
    version INTEGER NOT NULL DEFAULT 1,
    updated_at INTEGER NOT NULL,
    UNIQUE (agent_key, user_id, path)
);

CREATE TABLE memory_chunks (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    document_id INTEGER NOT NULL REFERENCES memory_documents(id) ON DELETE CASCADE,
    chunk_index INTEGER NOT NULL,
    start_line INTEGER NOT NULL,
    end_line INTEGER NOT NULL,
    content TEXT NOT NULL
);
CREATE INDEX memory_chunks_document ON memory_chunks (document_id);

CREATE VIRTUAL TABLE memory_chunks_fts USING fts5 (content, content = 'memory_chunks', content_rowid = 'id');
CREATE TRIGGER memory_chunks_ai AFTER INSERT ON memory_chunks BEGIN
    INSERT INTO memory_chunks_fts (rowid, content) VALUES (new.id, new.content);
END;
CREATE TRIGGER memory_chunks_ad AFTER DELETE ON memory_chunks BEGIN
    INSERT INTO memory_chunks_fts (memory_chunks_fts, rowid, content) VALUES ('delete', old.id, old.content);
END;

CREATE TABLE audit_log (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    tool TEXT NOT NULL,
    session_key TEXT NOT NULL,
    agent_key TEXT,
    user_id TEXT,
    args_digest TEXT NOT NULL,
    is_error INTEGER NOT NULL,
    duration_us INTEGER NOT NULL,
    stage TEXT,
    created_at INTEGER NOT NULL
);
CREATE INDEX audit_log_session ON audit_log (session_key, created_at);

CREATE TABLE secrets (
    name TEXT PRIMARY KEY,
    nonce BLOB NOT NULL,
    ciphertext BLOB NOT NULL,
    updated_at INTEGER NOT NULL
);

CREATE TABLE talon_meta (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
