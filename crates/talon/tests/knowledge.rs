//! Issue 26, knowledge: hybrid memory search (`memory`), skills (`skills`), the knowledge graph
//! (`graph`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod memory;

mod skills;

mod graph;
