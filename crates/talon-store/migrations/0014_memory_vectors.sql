-- Issue 26: one embedding per memory chunk, of the model named with it. Vectors are
-- @sqlite
-- little-endian f32, L2-normalised (sqlite-vec's vec_distance_cosine reads them as stored).
-- @postgres
-- L2-normalised, so the cosine similarity is the dot product (computed exactly in SQL).
-- @end
-- A changed model re-embeds chunk by chunk; until then its chunks are found by full text only.
CREATE TABLE memory_vectors (
    chunk_id {{bigint}} PRIMARY KEY REFERENCES memory_chunks(id) ON DELETE CASCADE,
    model TEXT NOT NULL,
    dims INTEGER NOT NULL,
-- @sqlite
    vector BLOB NOT NULL,
-- @postgres
    vector REAL[] NOT NULL,
-- @end
    embedded_at {{bigint}} NOT NULL
);
CREATE INDEX memory_vectors_model ON memory_vectors (model);
