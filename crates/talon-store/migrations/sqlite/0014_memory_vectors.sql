-- Issue 26: one embedding per memory chunk, of the model named with it. Vectors are
-- little-endian f32, L2-normalised (sqlite-vec's vec_distance_cosine reads them as stored).
-- A changed model re-embeds chunk by chunk; until then its chunks are found by full text only.
CREATE TABLE memory_vectors (
    chunk_id INTEGER PRIMARY KEY REFERENCES memory_chunks(id) ON DELETE CASCADE,
    model TEXT NOT NULL,
    dims INTEGER NOT NULL,
    vector BLOB NOT NULL,
    embedded_at INTEGER NOT NULL
);
CREATE INDEX memory_vectors_model ON memory_vectors (model);
