//! The knowledge-graph extractor (`[memory] knowledge_graph = true`): takes the memory
//! documents queued by their writes (`Store::claim_extractions`, leased, so gateways share
//! the work), has the document's agent's model extract entities and relations
//! (`talon_agent::side::GRAPH_INSTRUCTIONS`), checks the answer and stores it
//! (`Store::store_extraction`). Never in the write's path: a failing model or an answer that is
//! not the JSON asked for is retried after 2, 4, 8, … seconds, then given up with the error
//! kept (`talon doctor` shows it).

use std::time::Duration;

use serde::Deserialize;
use talon_agent::ProviderError;
use talon_store::{ExtractionJob, NewEntity, NewRelation, Store, StoreError};

use crate::agent_runs::RunError;
use crate::runner::Runner;

/// Documents claimed per pass.
const BATCH: i64 = 4;
/// How often the queue is looked at when it was empty.
const POLL: Duration = Duration::from_secs(2);
/// Bounds on what one document may add.
const MAX_ENTITIES: usize = 200;
const MAX_RELATIONS: usize = 400;
const MAX_NAME_CHARS: usize = 200;
const MAX_RELATION_CHARS: usize = 64;
const MAX_DESCRIPTION_CHARS: usize = 500;

/// Starts the extractor.
pub fn spawn(runner: Runner) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            match pass(&runner).await {
                Ok(0) => tokio::time::sleep(POLL).await,
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!(error = %e, "knowledge graph extraction cannot claim work");
                    tokio::time::sleep(POLL).await;
                }
            }
        }
    })
}

/// Why a document's extraction failed (it is retried, then given up with this message kept).
#[derive(Debug, thiserror::Error)]
pub enum ExtractionError {
    #[error("the model's answer has no JSON object")]
    NoJson,
    #[error("the model's answer is not the JSON asked for: {0}")]
    NotTheJson(#[source] serde_json::Error),
    #[error("the model failed: {0}")]
    Model(#[source] ProviderError),
    /// The document's agent cannot be built (gone, or its provider misconfigured).
    #[error(transparent)]
    Agent(RunError),
    #[error(transparent)]
    Store(StoreError),
}

/// One pass: claims due documents and extracts each; how many were claimed. Only claiming can
/// fail it (a document that fails is recorded as failed, for a retry).
pub async fn pass(runner: &Runner) -> Result<usize, StoreError> {
    let store = runner.store().clone();
    let jobs = store.claim_extractions(BATCH).await?;
    for job in &jobs {
        if let Err(e) = extract(runner, &store, job).await {
            let retry = 1000i64.saturating_mul(1 << job.attempt.clamp(1, 8));
            tracing::warn!(path = %job.path, attempt = job.attempt, error = %e, "knowledge graph extraction failed");
            if let Err(e) = store
                .extraction_failed(job.document_id, &e.to_string(), retry)
                .await
            {
                tracing::warn!(error = %e, "cannot record a failed extraction");
            }
        }
    }
    Ok(jobs.len())
}

async fn extract(
    runner: &Runner,
    store: &Store,
    job: &ExtractionJob,
) -> Result<(), ExtractionError> {
    let (entities, relations) = if job.content.trim().is_empty() {
        (Vec::new(), Vec::new())
    } else {
        let built = runner
            .engine()
            .agent(&job.agent)
            .await
            .map_err(ExtractionError::Agent)?;
        let answer = built
            .agent
            .extract_graph(&job.content)
            .await
            .map_err(ExtractionError::Model)?;
        parse(&answer)?
    };
    store
        .store_extraction(job, &entities, &relations)
        .await
        .map_err(ExtractionError::Store)?;
    Ok(())
}

#[derive(Deserialize)]
struct Answer {
    #[serde(default)]
    entities: Vec<Entity>,
    #[serde(default)]
    relations: Vec<Relation>,
}

#[derive(Deserialize)]
struct Entity {
    name: String,
    #[serde(default, alias = "kind")]
    r#type: String,
    #[serde(default)]
    description: String,
    #[serde(default)]
    aliases: Vec<String>,
}

#[derive(Deserialize)]
struct Relation {
    #[serde(alias = "from")]
    source: String,
    #[serde(alias = "type")]
    relation: String,
    #[serde(alias = "to")]
    target: String,
}

fn clip(text: &str, max: usize) -> String {
    text.trim().chars().take(max).collect()
}

/// The entities and relations of a model's answer: the JSON object in it (a fenced block is
/// fine), bounded and normalised; what is not that JSON is an error naming it.
pub fn parse(answer: &str) -> Result<(Vec<NewEntity>, Vec<NewRelation>), ExtractionError> {
    let (Some(start), Some(end)) = (answer.find('{'), answer.rfind('}')) else {
        return Err(ExtractionError::NoJson);
    };
    let parsed: Answer =
        serde_json::from_str(&answer[start..=end]).map_err(ExtractionError::NotTheJson)?;
    let entities: Vec<NewEntity> = parsed
        .entities
        .into_iter()
        .filter(|e| !e.name.trim().is_empty())
        .take(MAX_ENTITIES)
        .map(|e| NewEntity {
            name: clip(&e.name, MAX_NAME_CHARS),
            kind: clip(&e.r#type.to_lowercase(), MAX_RELATION_CHARS),
            description: clip(&e.description, MAX_DESCRIPTION_CHARS),
            aliases: e
                .aliases
                .iter()
                .map(|a| clip(a, MAX_NAME_CHARS))
                .filter(|a| !a.is_empty())
                .take(20)
                .collect(),
        })
        .collect();
    let relations = parsed
        .relations
        .into_iter()
        .take(MAX_RELATIONS)
        .map(|r| NewRelation {
            source: clip(&r.source, MAX_NAME_CHARS),
            relation: clip(
                &r.relation.trim().to_lowercase().replace([' ', '-'], "_"),
                MAX_RELATION_CHARS,
            ),
            target: clip(&r.target, MAX_NAME_CHARS),
        })
        .filter(|r| !r.source.is_empty() && !r.relation.is_empty() && !r.target.is_empty())
        .collect();
    Ok((entities, relations))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_parsed_bounded_and_named_when_wrong() {
        let (entities, relations) = parse(
            "```json\n{\"entities\": [{\"name\": \" Ann \", \"type\": \"Person\", \"aliases\": [\"A.\"]}, {\"name\": \"\"}],\n\"relations\": [{\"from\": \"Ann\", \"type\": \"Works On\", \"to\": \"Falcon\"}]}\n```",
        )
        .unwrap();
        assert_eq!(entities.len(), 1);
        assert_eq!(
            (entities[0].name.as_str(), entities[0].kind.as_str()),
            ("Ann", "person")
        );
        assert_eq!(relations[0].relation, "works_on");
        assert!(
            parse("no json here")
                .unwrap_err()
                .to_string()
                .contains("no JSON object")
        );
        assert!(
            parse("{\"entities\": 3}")
                .unwrap_err()
                .to_string()
                .contains("not the JSON asked for")
        );
    }
}
