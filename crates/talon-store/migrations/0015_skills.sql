-- Issue 26: skills published to the store, their files, and each use. user_id '' is everyone's.
CREATE TABLE skills (
    user_id TEXT NOT NULL DEFAULT '',
    name TEXT NOT NULL,
    description TEXT NOT NULL,
    frontmatter TEXT NOT NULL,
    instructions TEXT NOT NULL,
    version {{bigint}} NOT NULL DEFAULT 1,
    published_at {{bigint}} NOT NULL,
    PRIMARY KEY (user_id, name)
);
CREATE TABLE skill_files (
    user_id TEXT NOT NULL DEFAULT '',
    skill TEXT NOT NULL,
    path TEXT NOT NULL,
    content {{blob}} NOT NULL,
    PRIMARY KEY (user_id, skill, path),
    FOREIGN KEY (user_id, skill) REFERENCES skills (user_id, name) ON DELETE CASCADE
);
CREATE TABLE skill_uses (
    id {{serial_pk}},
    skill TEXT NOT NULL,
    source TEXT NOT NULL,
    agent_key TEXT NOT NULL,
    user_id TEXT NOT NULL DEFAULT '',
    used_at {{bigint}} NOT NULL
);
CREATE INDEX skill_uses_skill ON skill_uses (skill);
