-- Issue 26: the knowledge graph extracted from memory documents, per agent and user ('' global),
-- each entity and relation citing the documents that mention it; and the extraction queue (a
-- job per document, at its newest version, leased by next_at).
CREATE TABLE kg_entities (
    id {{serial_pk}},
    agent_key TEXT NOT NULL,
    user_id TEXT NOT NULL DEFAULT '',
    name TEXT NOT NULL,
    name_key TEXT NOT NULL,
    kind TEXT NOT NULL DEFAULT '',
    description TEXT NOT NULL DEFAULT '',
    updated_at {{bigint}} NOT NULL,
    UNIQUE (agent_key, user_id, name_key)
);
CREATE TABLE kg_aliases (
    entity_id {{bigint}} NOT NULL REFERENCES kg_entities(id) ON DELETE CASCADE,
    alias_key TEXT NOT NULL,
    PRIMARY KEY (entity_id, alias_key)
);
CREATE INDEX kg_aliases_key ON kg_aliases (alias_key);
CREATE TABLE kg_entity_docs (
    entity_id {{bigint}} NOT NULL REFERENCES kg_entities(id) ON DELETE CASCADE,
    path TEXT NOT NULL,
    PRIMARY KEY (entity_id, path)
);
CREATE TABLE kg_relations (
    id {{serial_pk}},
    agent_key TEXT NOT NULL,
    user_id TEXT NOT NULL DEFAULT '',
    source_id {{bigint}} NOT NULL REFERENCES kg_entities(id) ON DELETE CASCADE,
    relation TEXT NOT NULL,
    target_id {{bigint}} NOT NULL REFERENCES kg_entities(id) ON DELETE CASCADE,
    UNIQUE (source_id, relation, target_id)
);
CREATE INDEX kg_relations_source ON kg_relations (source_id);
CREATE INDEX kg_relations_target ON kg_relations (target_id);
CREATE TABLE kg_relation_docs (
    relation_id {{bigint}} NOT NULL REFERENCES kg_relations(id) ON DELETE CASCADE,
    path TEXT NOT NULL,
    PRIMARY KEY (relation_id, path)
);
CREATE TABLE kg_jobs (
    document_id {{bigint}} PRIMARY KEY REFERENCES memory_documents(id) ON DELETE CASCADE,
    version {{bigint}} NOT NULL,
    attempts {{bigint}} NOT NULL DEFAULT 0,
    next_at {{bigint}} NOT NULL,
    last_error TEXT NOT NULL DEFAULT ''
);
CREATE INDEX kg_jobs_due ON kg_jobs (next_at);
