-- Talon schema v22 (issue 36).
-- The messages of a session's running turn so far, as a JSON array of neutral messages: written
-- after each model answer that calls tools and after their results, cleared when the turn is
-- saved. A run taken over after its gateway died resumes from them instead of its task.
ALTER TABLE sessions ADD COLUMN checkpoint TEXT NOT NULL DEFAULT '';
