-- Issue 26: one embedding per memory chunk, of the model named with it. Vectors are
-- L2-normalised, so the cosine similarity is the dot product (computed exactly in SQL).
-- A changed model re-embeds chunk by chunk; until then its chunks are found by full text only.
CREATE TABLE memory_vectors (
    chunk_id BIGINT PRIMARY KEY REFERENCES memory_chunks(id) ON DELETE CASCADE,
    model TEXT NOT NULL,
    dims INTEGER NOT NULL,
    vector REAL[] NOT NULL,
    embedded_at BIGINT NOT NULL
);
CREATE INDEX memory_vectors_model ON memory_vectors (model);
