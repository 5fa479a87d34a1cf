use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use super::*;

fn form() -> Value {
    json!({
        "message": "Which database?",
        "requestedSchema": {"type": "object", "required": ["q1"], "properties": {
            "q1": {"type": "string", "enum": ["SQLite", "PostgreSQL"]},
            "q2": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}}
        }}
    })
}

/// Waits until a question is pending and returns it.
async fn asked(broker: &Questions) -> PendingQuestion {
    for _ in 0..500 {
        if let Some(q) = broker.pending(None).into_iter().next() {
            return q;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    panic!("no question was asked");
}

fn accept(content: Value) -> Answer {
    serde_json::from_value(json!({"action": "accept", "content": content})).expect("an answer")
}

#[tokio::test]
async fn a_question_waits_is_announced_and_gets_the_answer() {
    let events = EventBus::default();
    let mut rx = events.subscribe();
    let broker = Arc::new(Questions::new(events));
    let client = broker.client("s1", Some("ops"), None);
    let asking = tokio::spawn(async move { client.0.elicit(form()).await });
    let question = asked(&broker).await;
    assert_eq!(question.message, "Which database?");
    assert_eq!(
        (question.session.as_str(), question.agent.as_deref()),
        ("s1", Some("ops"))
    );

    // An answer outside the choices is refused and the question keeps waiting.
    let wrong = broker.answer(&question.id, None, accept(json!({"q1": "MySQL"})));
    assert!(
        matches!(&wrong, Err(AnswerError::Invalid { why, .. }) if why.contains("MySQL") && why.contains("PostgreSQL")),
        "{wrong:?}"
    );
    let missing = broker.answer(&question.id, None, accept(json!({"q2": ["a"]})));
    assert!(
        matches!(missing, Err(AnswerError::Invalid { .. })),
        "{missing:?}"
    );
    assert_eq!(broker.pending(None).len(), 1);

    broker
        .answer(
            &question.id,
            None,
            accept(json!({"q1": "PostgreSQL", "q2": ["a", "b"]})),
        )
        .expect("answered");
    let result = asking.await.expect("joined").expect("an answer");
    assert_eq!(
        result,
        json!({"action": "accept", "content": {"q1": "PostgreSQL", "q2": ["a", "b"]}})
    );
    assert!(broker.pending(None).is_empty());
    assert_eq!(
        broker.answer(&question.id, None, Answer::Decline),
        Err(AnswerError::Unknown(question.id.clone()))
    );

    match rx.recv().await.expect("asked") {
        ToolEvent::QuestionAsked { request } => assert_eq!(request.id, question.id),
        other => panic!("unexpected {other:?}"),
    }
    match rx.recv().await.expect("answered") {
        ToolEvent::QuestionAnswered {
            action,
            session_key,
            ..
        } => {
            assert_eq!((action, &*session_key), ("accept", "s1"));
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[tokio::test]
async fn declining_and_timing_out_are_reported() {
    let broker =
        Arc::new(Questions::new(EventBus::default()).with_timeout(Duration::from_millis(300)));
    let client = broker.client("s", None, None);
    let asking = tokio::spawn({
        let client = client.clone();
        async move { client.0.elicit(form()).await }
    });
    let question = asked(&broker).await;
    broker
        .answer(&question.id, None, Answer::Decline)
        .expect("declined");
    assert_eq!(
        asking.await.expect("joined"),
        Ok(json!({"action": "decline"}))
    );

    let late = client.0.elicit(form()).await;
    assert_eq!(late, Err("nobody answered within 0s".to_string()));
    assert!(broker.pending(None).is_empty());

    let bad = client.0.elicit(json!({"requestedSchema": {}})).await;
    assert!(bad.is_err_and(|e| e.contains("message")));
}

#[tokio::test]
async fn a_caller_that_goes_away_withdraws_its_question() {
    let broker = Arc::new(Questions::new(EventBus::default()));
    let client = broker.client("s", None, None);
    let asking = tokio::spawn(async move { client.0.elicit(form()).await });
    asked(&broker).await;
    asking.abort();
    let _ = asking.await;
    assert!(broker.pending(None).is_empty());
}
