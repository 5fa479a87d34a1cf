//! Knowledge tools (group `knowledge`, with `skill_search`): `knowledge_graph_search` over the
//! entities and relations extracted from memory documents.

pub mod knowledge_graph_search;
