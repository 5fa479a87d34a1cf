//! Issue 26, knowledge: hybrid memory search (`memory`), skills (`skills`), the knowledge graph
//! (`graph`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

#[path = "knowledge/memory.rs"]
mod memory;

#[path = "knowledge/skills.rs"]
mod skills;

#[path = "knowledge/graph.rs"]
mod graph;
