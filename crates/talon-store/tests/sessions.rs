//! Sessions and their messages on both engines: turns saved whole, history in order, an
//! interrupted turn reported and never half-saved, sessions belong to one agent.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use talon_store::{NewRun, RunLimits, RunRefused, RunStatus, RunUsage, Store, StoreConfig};

suite!(
    turns_append_in_order_and_count_tokens,
    an_unfinished_turn_is_reported_as_interrupted,
    a_session_belongs_to_its_agent,
    listing_and_limits,
    concurrent_turns_do_not_lock_each_other_out,
    compaction_keeps_messages_and_moves_the_live_history,
    settings_are_kept_per_session_and_replaced_one_by_one,
    h22_4_a_session_is_seen_and_continued_only_by_its_owner,
    runs_count_live_rows_and_free_their_slots,
    concurrent_runs_never_exceed_the_limit_across_gateways,
    runs_nest_only_as_deep_as_allowed,
    a_childs_result_reaches_its_parent_session_once,
    a_dead_gateways_runs_are_taken_over_once,
    h36_10_a_gateway_renews_and_keeps_only_the_runs_it_holds,
    h36_5_a_user_holds_only_their_share_and_jobs_have_their_own_pool,
    cancelling_a_run_flags_its_whole_tree_and_nothing_else,
    steering_a_child_at_capacity_keeps_its_slot,
    a_result_is_announced_by_one_gateway_or_taken_once,
    gateways_claiming_at_once_never_share_a_result,
    delegations_count_over_their_link_and_their_target,
    a_thousand_spawn_cycles_never_exhaust_a_slot,
);

async fn open(config: &StoreConfig) -> Store {
    Store::open(config).await.unwrap()
}

fn msgs(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

async fn turns_append_in_order_and_count_tokens(config: &StoreConfig) {
    let store = open(config).await;
    let first = store.begin_turn("k1", "default", None).await.unwrap();
    assert_eq!(first.turn, 1);
    assert!(!first.previous_interrupted);
    assert_eq!(store.session("k1").await.unwrap().unwrap().state, "running");
    store
        .finish_turn("k1", first.turn, &msgs(&["u1", "a1"]), "final", 10, 3)
        .await
        .unwrap();
    let second = store.begin_turn("k1", "default", None).await.unwrap();
    assert_eq!(second.turn, 2);
    store
        .finish_turn(
            "k1",
            second.turn,
            &msgs(&["u2", "a2", "r2", "a3"]),
            "final",
            5,
            2,
        )
        .await
        .unwrap();
    assert_eq!(
        store.session_messages("k1", None).await.unwrap(),
        ["u1", "a1", "u2", "a2", "r2", "a3"]
    );
    assert_eq!(
        store.session_messages("k1", Some(2)).await.unwrap(),
        ["r2", "a3"],
        "the newest, oldest first"
    );
    let s = store.session("k1").await.unwrap().unwrap();
    assert_eq!(
        (s.state.as_str(), s.turns, s.input_tokens, s.output_tokens),
        ("idle", 2, 15, 5)
    );
    assert_eq!(s.last_stop, "final");
}

async fn an_unfinished_turn_is_reported_as_interrupted(config: &StoreConfig) {
    let store = open(config).await;
    let t = store.begin_turn("k2", "default", None).await.unwrap();
    store
        .finish_turn("k2", t.turn, &msgs(&["u1", "a1"]), "final", 1, 1)
        .await
        .unwrap();
    // A turn starts and its process dies: nothing of it is saved.
    store.begin_turn("k2", "default", None).await.unwrap();
    // A starting gateway marks it.
    assert_eq!(store.mark_interrupted_turns().await.unwrap(), 1);
    let s = store.session("k2").await.unwrap().unwrap();
    assert_eq!(
        (s.state.as_str(), s.last_stop.as_str()),
        ("interrupted", "interrupted")
    );
    assert_eq!(
        store.session_messages("k2", None).await.unwrap(),
        ["u1", "a1"]
    );
    // Without a gateway in between, the next turn finds it still running.
    store.begin_turn("k2", "default", None).await.unwrap();
    let next = store.begin_turn("k2", "default", None).await.unwrap();
    assert!(next.previous_interrupted);
    assert_eq!(next.turn, 4);
}

async fn a_session_belongs_to_its_agent(config: &StoreConfig) {
    let store = open(config).await;
    store.begin_turn("k3", "alice", None).await.unwrap();
    let err = store
        .begin_turn("k3", "bob", None)
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("taken by another agent or user"), "{err}");
    let err = store
        .begin_turn("", "bob", None)
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("session key"), "{err}");
    let err = store
        .finish_turn("never-begun", 1, &msgs(&["x"]), "final", 0, 0)
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("begin_turn first"), "{err}");
    assert!(
        store
            .session_messages("never-begun", None)
            .await
            .unwrap()
            .is_empty(),
        "rolled back"
    );
}

async fn listing_and_limits(config: &StoreConfig) {
    let store = open(config).await;
    for (key, agent) in [("a1", "alice"), ("b1", "bob"), ("a2", "alice")] {
        let t = store.begin_turn(key, agent, None).await.unwrap();
        store
            .finish_turn(key, t.turn, &msgs(&["m"]), "final", 0, 0)
            .await
            .unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    let all: Vec<String> = store
        .sessions(None, None, 10)
        .await
        .unwrap()
        .into_iter()
        .map(|s| s.key)
        .collect();
    assert_eq!(all, ["a2", "b1", "a1"], "most recent first");
    let alice: Vec<String> = store
        .sessions(Some("alice"), None, 10)
        .await
        .unwrap()
        .into_iter()
        .map(|s| s.key)
        .collect();
    assert_eq!(alice, ["a2", "a1"]);
    assert_eq!(store.sessions(None, None, 1).await.unwrap().len(), 1);
}

async fn concurrent_turns_do_not_lock_each_other_out(config: &StoreConfig) {
    let store = open(config).await;
    let tasks: Vec<_> = (0..24)
        .map(|i| {
            let store = store.clone();
            tokio::spawn(async move {
                for _ in 0..3 {
                    let key = format!("busy-{}", i % 8);
                    let t = store.begin_turn(&key, "default", None).await.unwrap();
                    store
                        .finish_turn(&key, t.turn, &[format!("m{i}")], "final", 1, 1)
                        .await
                        .unwrap();
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    let total: i64 = store
        .sessions(None, None, 100)
        .await
        .unwrap()
        .iter()
        .map(|s| s.turns)
        .sum();
    assert_eq!(total, 72);
    let messages: usize = message_count(&store).await;
    assert_eq!(messages, 72);
}

async fn message_count(store: &Store) -> usize {
    let mut n = 0;
    for i in 0..8 {
        n += store
            .session_messages(&format!("busy-{i}"), None)
            .await
            .unwrap()
            .len();
    }
    n
}

async fn compaction_keeps_messages_and_moves_the_live_history(config: &StoreConfig) {
    let store = open(config).await;
    let t = store.begin_turn("c1", "default", None).await.unwrap();
    store
        .finish_turn(
            "c1",
            t.turn,
            &msgs(&["u1", "a1", "u2", "a2"]),
            "final",
            0,
            0,
        )
        .await
        .unwrap();
    let all = store.session_messages_after("c1", 0).await.unwrap();
    assert_eq!(all.iter().map(|m| m.0).collect::<Vec<_>>(), [1, 2, 3, 4]);
    assert!(
        store
            .compact_session("c1", 2, "u1 was answered")
            .await
            .unwrap()
    );
    assert!(
        !store.compact_session("c1", 1, "shorter").await.unwrap(),
        "never goes back"
    );
    let s = store.session("c1").await.unwrap().unwrap();
    assert_eq!(
        (s.summary.as_str(), s.summary_through),
        ("u1 was answered", 2)
    );
    let live: Vec<String> = store
        .session_messages_after("c1", s.summary_through)
        .await
        .unwrap()
        .into_iter()
        .map(|m| m.1)
        .collect();
    assert_eq!(live, ["u2", "a2"]);
    assert_eq!(
        store.session_messages("c1", None).await.unwrap().len(),
        4,
        "nothing deleted"
    );
}

async fn settings_are_kept_per_session_and_replaced_one_by_one(config: &StoreConfig) {
    use serde_json::json;
    let store = open(config).await;
    assert!(store.session_settings("s1").await.unwrap().is_empty());
    let missing = store.set_session_setting("s1", "model", &json!("m")).await;
    assert!(
        missing.is_err_and(|e| e.to_string().contains("not a stored session")),
        "a setting needs its session"
    );
    store.begin_turn("s1", "default", None).await.unwrap();
    store.begin_turn("s2", "default", None).await.unwrap();
    store
        .set_session_setting("s1", "model", &json!("small"))
        .await
        .unwrap();
    store
        .set_session_setting("s1", "autoCompactEnabled", &json!(false))
        .await
        .unwrap();
    store
        .set_session_setting("s1", "model", &json!("large"))
        .await
        .unwrap();
    let settings = store.session_settings("s1").await.unwrap();
    assert_eq!(
        serde_json::Value::Object(settings),
        json!({"model": "large", "autoCompactEnabled": false})
    );
    assert!(store.session_settings("s2").await.unwrap().is_empty());
}

/// Issue 22 item 4: sessions record their user; another user's session (or an owned one, for a
/// call naming no user) is not found, is not listed, and is never continued.
async fn h22_4_a_session_is_seen_and_continued_only_by_its_owner(config: &StoreConfig) {
    let store = open(config).await;
    for (key, owner) in [
        ("alice-1", Some("alice")),
        ("bob-1", Some("bob")),
        ("open-1", None),
    ] {
        let t = store.begin_turn(key, "default", owner).await.unwrap();
        store
            .finish_turn(key, t.turn, &msgs(&["m"]), "final", 0, 0)
            .await
            .unwrap();
    }
    let keys = |list: Vec<talon_store::SessionRecord>| -> Vec<String> {
        list.into_iter().map(|s| s.key).collect()
    };
    for (owner, own) in [
        (Some("alice"), "alice-1"),
        (Some("bob"), "bob-1"),
        (None, "open-1"),
    ] {
        assert_eq!(
            keys(store.sessions(None, owner, 10).await.unwrap()),
            [own],
            "{owner:?}"
        );
        assert_eq!(
            keys(store.sessions(Some("default"), owner, 10).await.unwrap()),
            [own]
        );
        for key in ["alice-1", "bob-1", "open-1"] {
            let found = store
                .owned_session(key, Some("default"), owner)
                .await
                .unwrap();
            assert_eq!(found.is_some(), key == own, "{owner:?} looking up {key}");
        }
    }
    let alice = store
        .owned_session("alice-1", None, Some("alice"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(alice.owner, "alice");
    assert!(
        store
            .owned_session("alice-1", Some("other"), Some("alice"))
            .await
            .unwrap()
            .is_none(),
        "another agent's"
    );
    // Bob (or a call naming no user) cannot write into Alice's session.
    for intruder in [Some("bob"), None] {
        let err = store
            .begin_turn("alice-1", "default", intruder)
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains("taken by another agent or user"), "{err}");
        assert!(!err.contains("alice\""), "whose it is stays unsaid: {err}");
    }
    let after = store.session("alice-1").await.unwrap().unwrap();
    assert_eq!((after.turns, after.state.as_str()), (1, "idle"));
    assert_eq!(
        store
            .begin_turn("alice-1", "default", Some("alice"))
            .await
            .unwrap()
            .turn,
        2
    );
}

fn new_run<'a>(parent: Option<&'a str>, session: &'a str, tenant: &'a str) -> NewRun<'a> {
    NewRun {
        parent,
        parent_session: session,
        session_prefix: "agent:helper:subagent:direct:",
        agent: "helper",
        tenant,
        origin: "subagent",
        context_mode: "fresh",
        task: "look something up",
        owner: "gateway-a",
        lease_until: i64::MAX,
        ..Default::default()
    }
}

/// Issue 24: limits count live runs per parent (run or session), a finished run frees its
/// slot at once, and the refusal uses the seeds' words.
async fn runs_count_live_rows_and_free_their_slots(config: &StoreConfig) {
    let store = open(config).await;
    let limits = RunLimits {
        max_children: 2,
        ..RunLimits::default()
    };
    let first = store
        .create_run(&new_run(None, "s1", ""), limits)
        .await
        .unwrap();
    store
        .create_run(&new_run(None, "s1", ""), limits)
        .await
        .unwrap();
    let refused = store
        .create_run(&new_run(None, "s1", ""), limits)
        .await
        .unwrap_err();
    assert_eq!(
        refused.to_string(),
        "Agent at capacity (2/2). Try a different agent or handle it yourself."
    );
    // Another session's turn has slots of its own.
    store
        .create_run(&new_run(None, "s2", ""), limits)
        .await
        .unwrap();
    assert!(
        store
            .finish_run(
                &first.id,
                None,
                RunStatus::LimitReached,
                "stopped at 20 iterations",
                RunUsage {
                    input_tokens: 5,
                    output_tokens: 7,
                    model_requests: 2
                },
                false
            )
            .await
            .unwrap()
    );
    let ended = store.run(&first.id).await.unwrap().unwrap();
    assert_eq!(
        ended.status,
        RunStatus::LimitReached,
        "a capped run is not completed"
    );
    assert_eq!(
        (
            ended.input_tokens,
            ended.output_tokens,
            ended.model_requests
        ),
        (5, 7, 2)
    );
    store
        .create_run(&new_run(None, "s1", ""), limits)
        .await
        .unwrap();
    assert_eq!(store.child_runs(None, "s1").await.unwrap().len(), 3);
}

/// Issue 24: two gateways creating runs at once never take more slots than the tenant has
/// (one locked statement counts and inserts).
async fn concurrent_runs_never_exceed_the_limit_across_gateways(config: &StoreConfig) {
    let (a, b) = (open(config).await, open(config).await);
    let limits = RunLimits {
        max_concurrent: 3,
        max_children: 100,
        ..RunLimits::default()
    };
    let sessions: Vec<String> = (0..12).map(|i| format!("s{i}")).collect();
    let attempts = sessions.iter().enumerate().map(|(i, session)| {
        let store = if i % 2 == 0 { &a } else { &b };
        async move {
            store
                .create_run(&new_run(None, session, "acme"), limits)
                .await
        }
    });
    let results = futures_join_all(attempts).await;
    let created = results.iter().filter(|r| r.is_ok()).count();
    assert_eq!(created, 3, "{results:?}");
    for refused in results.iter().filter_map(|r| r.as_ref().err()) {
        assert!(
            matches!(refused, RunRefused::Concurrent { live: 3, max: 3 }),
            "{refused}"
        );
    }
    // Another tenant is counted apart.
    a.create_run(&new_run(None, "other", "globex"), limits)
        .await
        .unwrap();
}

/// Runs `futures` concurrently on this task.
async fn futures_join_all<F: std::future::Future>(
    futures: impl IntoIterator<Item = F>,
) -> Vec<F::Output> {
    let futures: Vec<_> = futures.into_iter().map(Box::pin).collect();
    let mut outputs: Vec<Option<F::Output>> = futures.iter().map(|_| None).collect();
    let mut pending: Vec<_> = futures.into_iter().enumerate().collect();
    std::future::poll_fn(|cx| {
        pending.retain_mut(|(i, fut)| match fut.as_mut().poll(cx) {
            std::task::Poll::Ready(out) => {
                outputs[*i] = Some(out);
                false
            }
            std::task::Poll::Pending => true,
        });
        if pending.is_empty() {
            std::task::Poll::Ready(())
        } else {
            std::task::Poll::Pending
        }
    })
    .await;
    outputs.into_iter().flatten().collect()
}

/// Issue 24: MaxSpawnDepth 1 by default: a run may not start another; deeper trees keep their
/// root.
async fn runs_nest_only_as_deep_as_allowed(config: &StoreConfig) {
    let store = open(config).await;
    let top = store
        .create_run(&new_run(None, "s1", ""), RunLimits::default())
        .await
        .unwrap();
    assert_eq!((top.depth, top.root_id.as_str()), (1, top.id.as_str()));
    let refused = store
        .create_run(
            &new_run(Some(&top.id), &top.session_key, ""),
            RunLimits::default(),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(refused, RunRefused::Depth { depth: 1, max: 1 }),
        "{refused}"
    );
    let deeper = RunLimits {
        max_depth: 2,
        ..RunLimits::default()
    };
    let child = store
        .create_run(&new_run(Some(&top.id), &top.session_key, ""), deeper)
        .await
        .unwrap();
    assert_eq!((child.depth, child.root_id.as_str()), (2, top.id.as_str()));
    assert!(matches!(
        store
            .create_run(&new_run(Some("run-nope"), "s1", ""), deeper)
            .await,
        Err(RunRefused::NoParent(_))
    ));
}

/// Issue 24: a child's result is written with its end and reaches the parent session exactly
/// once: a second end is ignored, and the turn that takes it marks it in the transaction that
/// saves the turn.
async fn a_childs_result_reaches_its_parent_session_once(config: &StoreConfig) {
    let store = open(config).await;
    let run = store
        .create_run(&new_run(None, "parent", ""), RunLimits::default())
        .await
        .unwrap();
    assert!(
        store
            .finish_run(
                &run.id,
                None,
                RunStatus::Completed,
                "the answer",
                RunUsage {
                    input_tokens: 1,
                    output_tokens: 2,
                    model_requests: 1
                },
                false
            )
            .await
            .unwrap()
    );
    assert!(
        !store
            .finish_run(
                &run.id,
                None,
                RunStatus::Failed,
                "a late failure",
                RunUsage::default(),
                false
            )
            .await
            .unwrap(),
        "the first end stands"
    );
    let (used, started) = store.root_usage(&run.id).await.unwrap();
    assert_eq!(
        used,
        RunUsage {
            input_tokens: 1,
            output_tokens: 2,
            model_requests: 1
        }
    );
    assert_eq!(started, run.created_at);
    let pending = store.pending_deliveries("parent", 20).await.unwrap();
    assert_eq!(pending.len(), 1);
    assert_eq!(
        (pending[0].status, pending[0].result.as_str()),
        (RunStatus::Completed, "the answer")
    );
    store.begin_turn("parent", "helper", None).await.unwrap();
    store
        .finish_turn_delivering(
            "parent",
            1,
            &msgs(&["{}"]),
            "final",
            (0, 0),
            std::slice::from_ref(&run.id),
        )
        .await
        .unwrap();
    assert!(
        store
            .pending_deliveries("parent", 20)
            .await
            .unwrap()
            .is_empty()
    );
    store.begin_turn("parent", "helper", None).await.unwrap();
    let again = store
        .finish_turn_delivering(
            "parent",
            2,
            &msgs(&["{}"]),
            "final",
            (0, 0),
            std::slice::from_ref(&run.id),
        )
        .await;
    assert!(again.is_err(), "a result is delivered once");
}

/// Issue 24: a run whose gateway died (its lease ran out) is taken over by exactly one other
/// gateway; its old owner can no longer renew it.
async fn a_dead_gateways_runs_are_taken_over_once(config: &StoreConfig) {
    let store = open(config).await;
    let mut dying = new_run(None, "s1", "");
    dying.owner = "gateway-dead";
    dying.lease_until = 1;
    let run = store
        .create_run(&dying, RunLimits::default())
        .await
        .unwrap();
    let alive = store
        .create_run(&new_run(None, "s1", ""), RunLimits::default())
        .await
        .unwrap();
    let far = i64::MAX / 2;
    let (b, c) = futures_join_all([
        store.take_over_runs("gateway-b", &[], far, 10),
        store.take_over_runs("gateway-c", &[], far, 10),
    ])
    .await
    .into_iter()
    .map(Result::unwrap)
    .fold((Vec::new(), Vec::new()), |(mut b, c), taken| {
        if b.is_empty() {
            b = taken;
            (b, c)
        } else {
            (b, taken)
        }
    });
    let taken: Vec<&str> = b.iter().chain(&c).map(|r| r.id.as_str()).collect();
    assert_eq!(
        taken,
        [run.id.as_str()],
        "taken once, and only the expired run"
    );
    assert_ne!(alive.id, run.id);
    assert_eq!(
        store
            .renew_run_leases("gateway-dead", std::slice::from_ref(&run.id), far)
            .await
            .unwrap(),
        0
    );
    assert_eq!(store.run(&run.id).await.unwrap().unwrap().takeovers, 1);
    // The dead gateway (stalled, not dead after all) cannot end the run it lost.
    assert!(
        !store
            .finish_run(
                &run.id,
                Some("gateway-dead"),
                RunStatus::Cancelled,
                "",
                RunUsage::default(),
                false
            )
            .await
            .unwrap()
    );
    let owner = store.run(&run.id).await.unwrap().unwrap().owner;
    assert!(
        store
            .finish_run(
                &run.id,
                Some(&owner),
                RunStatus::Completed,
                "",
                RunUsage::default(),
                false
            )
            .await
            .unwrap()
    );
}

/// Issue 36 (5): one user's runs stop at their share of the tenant's slots, so another user
/// still gets one; scheduled jobs' runs count in a pool of their own, taking no user's slot.
async fn h36_5_a_user_holds_only_their_share_and_jobs_have_their_own_pool(config: &StoreConfig) {
    let store = open(config).await;
    let limits = RunLimits {
        max_concurrent: 3,
        max_per_user: 2,
        max_children: 10,
        ..RunLimits::default()
    };
    let as_user = |user: &'static str, session: &'static str| NewRun {
        user,
        ..new_run(None, session, "acme")
    };
    for session in ["a1", "a2"] {
        store
            .create_run(&as_user("alice", session), limits)
            .await
            .unwrap();
    }
    let refused = store
        .create_run(&as_user("alice", "a3"), limits)
        .await
        .unwrap_err();
    assert!(refused.to_string().contains("your share"), "{refused}");
    store
        .create_run(&as_user("bob", "b1"), limits)
        .await
        .unwrap();
    // The tenant is full for people now, but not for its scheduled jobs.
    let full = store
        .create_run(&as_user("carol", "c1"), limits)
        .await
        .unwrap_err();
    assert!(
        full.to_string()
            .contains("Too many agent runs at once (3/3)"),
        "{full}"
    );
    let scheduled = RunLimits {
        max_concurrent: 1,
        ..limits
    };
    let job = NewRun {
        origin: "cron",
        ..as_user("alice", "job")
    };
    store.create_run(&job, scheduled).await.unwrap();
    let second = store.create_run(&job, scheduled).await.unwrap_err();
    assert!(second.to_string().contains("(1/1)"), "{second}");
}

/// Issue 36 (10): a lease follows the runs a process really runs. One it only owns the row of
/// (its executor is gone) is not renewed, and is taken over when it lapses; one it runs is
/// never taken over, not even by itself after its lease lapsed in a database outage.
async fn h36_10_a_gateway_renews_and_keeps_only_the_runs_it_holds(config: &StoreConfig) {
    let store = open(config).await;
    let mut lapsed = new_run(None, "s1", "");
    lapsed.lease_until = 1;
    let running = store
        .create_run(&lapsed, RunLimits::default())
        .await
        .unwrap();
    let orphan = store
        .create_run(&lapsed, RunLimits::default())
        .await
        .unwrap();
    let far = i64::MAX / 2;
    let held = std::slice::from_ref(&running.id);
    // Only the run it holds is renewed: the orphan's lease stays lapsed.
    assert_eq!(
        store.renew_run_leases("gateway-a", held, 2).await.unwrap(),
        1
    );
    assert_eq!(store.run(&orphan.id).await.unwrap().unwrap().lease_until, 1);
    // Its own gateway, and another, take over the orphan; neither takes the held run.
    let taken = store
        .take_over_runs("gateway-a", held, far, 10)
        .await
        .unwrap();
    assert_eq!(
        taken.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(),
        [orphan.id.as_str()]
    );
    assert!(
        store
            .take_over_runs("gateway-a", held, far, 10)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(store.run(&running.id).await.unwrap().unwrap().takeovers, 0);
}

/// Issue 24: cancelling a run flags it and its descendants, on every gateway (a durable flag),
/// and never another tree's runs.
async fn cancelling_a_run_flags_its_whole_tree_and_nothing_else(config: &StoreConfig) {
    let store = open(config).await;
    let deep = RunLimits {
        max_depth: 3,
        ..RunLimits::default()
    };
    let root = store
        .create_run(&new_run(None, "s1", ""), deep)
        .await
        .unwrap();
    let child = store
        .create_run(&new_run(Some(&root.id), &root.session_key, ""), deep)
        .await
        .unwrap();
    let grandchild = store
        .create_run(&new_run(Some(&child.id), &child.session_key, ""), deep)
        .await
        .unwrap();
    let stranger = store
        .create_run(&new_run(None, "s2", ""), deep)
        .await
        .unwrap();
    assert_eq!(store.request_run_cancel(&root.id).await.unwrap(), 3);
    for (id, flagged) in [
        (&root.id, true),
        (&child.id, true),
        (&grandchild.id, true),
        (&stranger.id, false),
    ] {
        assert_eq!(
            store.run(id).await.unwrap().unwrap().cancel_requested,
            flagged,
            "{id}"
        );
    }
}

/// Issue 24 (GoClaw's bug, research/multi-agent.md §1.1): steering a child when the parent is at
/// capacity replaces it in its own slot; a run that ended cannot be replaced.
async fn steering_a_child_at_capacity_keeps_its_slot(config: &StoreConfig) {
    let store = open(config).await;
    let limits = RunLimits {
        max_children: 2,
        ..RunLimits::default()
    };
    let first = store
        .create_run(&new_run(None, "p", ""), limits)
        .await
        .unwrap();
    store
        .create_run(&new_run(None, "p", ""), limits)
        .await
        .unwrap();
    assert!(matches!(
        store.create_run(&new_run(None, "p", ""), limits).await,
        Err(RunRefused::Children { live: 2, max: 2 })
    ));
    let steered = store
        .replace_run(&first.id, &new_run(None, "p", ""), limits)
        .await
        .unwrap();
    assert_eq!(steered.status, RunStatus::Running);
    let old = store.run(&first.id).await.unwrap().unwrap();
    assert_eq!(old.status, RunStatus::Cancelled);
    assert!(
        store.pending_deliveries("p", 20).await.unwrap().is_empty(),
        "a replaced run's end is not announced"
    );
    assert!(matches!(
        store
            .replace_run(&first.id, &new_run(None, "p", ""), limits)
            .await,
        Err(RunRefused::NotLive(_))
    ));
    assert_eq!(store.child_runs(None, "p").await.unwrap().len(), 3);
}

/// Ends `id` `completed` with the result "done", for its parent to be told.
async fn complete(store: &Store, id: &str) {
    assert!(
        store
            .finish_run(
                id,
                None,
                RunStatus::Completed,
                "done",
                RunUsage::default(),
                false,
            )
            .await
            .unwrap()
    );
}

/// Issue 24: an undelivered result is claimed by one announcing gateway at a time; released, it
/// can be claimed again; a caller that waited takes it once, and then nobody announces it.
async fn a_result_is_announced_by_one_gateway_or_taken_once(config: &StoreConfig) {
    let store = open(config).await;
    let mut run = new_run(None, "p", "");
    run.parent_agent = "boss";
    let a = store.create_run(&run, RunLimits::default()).await.unwrap();
    let b = store.create_run(&run, RunLimits::default()).await.unwrap();
    for id in [&a.id, &b.id] {
        complete(&store, id).await;
    }
    assert_eq!(
        store.undelivered_sessions(10).await.unwrap(),
        [("p".to_string(), "boss".to_string(), String::new())]
    );
    let far = i64::MAX / 2;
    let first = store.claim_deliveries("p", "gw-a", far, 1).await.unwrap();
    assert_eq!(first.len(), 1, "at most the limit");
    let rest = store.claim_deliveries("p", "gw-b", far, 20).await.unwrap();
    assert_eq!(rest.len(), 1, "the other one only");
    assert_ne!(first[0].child_id, rest[0].child_id);
    assert!(
        store
            .claim_deliveries("p", "gw-c", far, 20)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(store.undelivered_sessions(10).await.unwrap().is_empty());
    assert!(
        store
            .take_delivery("p", &rest[0].child_id)
            .await
            .unwrap()
            .is_none(),
        "being announced: not taken"
    );
    store.release_deliveries("p", "gw-b").await.unwrap();
    let taken = store
        .take_delivery("p", &rest[0].child_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(taken.result, "done");
    assert!(
        store
            .take_delivery("p", &rest[0].child_id)
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        store
            .claim_deliveries("p", "gw-c", far, 20)
            .await
            .unwrap()
            .is_empty()
    );
}

/// Issue 24: four gateways claiming one session's results at the same moment (on PostgreSQL,
/// `FOR UPDATE SKIP LOCKED`) never claim one result twice, and leave none unclaimable.
async fn gateways_claiming_at_once_never_share_a_result(config: &StoreConfig) {
    let store = open(config).await;
    let mut run = new_run(None, "p", "");
    run.parent_agent = "boss";
    let limits = RunLimits {
        max_children: 10,
        ..RunLimits::default()
    };
    for _ in 0..6 {
        let child = store.create_run(&run, limits).await.unwrap();
        complete(&store, &child.id).await;
    }
    let far = i64::MAX / 2;
    let claims = futures_join_all(
        ["gw-a", "gw-b", "gw-c", "gw-d"]
            .map(|gateway| store.claim_deliveries("p", gateway, far, 2)),
    )
    .await;
    let mut claimed: Vec<String> = claims
        .into_iter()
        .flat_map(|c| c.unwrap())
        .map(|d| d.child_id)
        .collect();
    let before = claimed.len();
    claimed.sort();
    claimed.dedup();
    assert_eq!(claimed.len(), before, "a result claimed twice");
    let rest = store.claim_deliveries("p", "gw-z", far, 20).await.unwrap();
    assert_eq!(claimed.len() + rest.len(), 6);
}

/// Issue 24: a delegation counts against its agent link's `max_concurrent` (a bidirectional
/// link counts delegations both ways) and its target's `max_delegation_load`, in the statement
/// that creates it, with the seeds' words when refused.
async fn delegations_count_over_their_link_and_their_target(config: &StoreConfig) {
    let store = open(config).await;
    let delegation = |from: &'static str, to: &'static str| {
        let mut run = new_run(None, "p", "");
        run.origin = "delegation";
        run.parent_agent = from;
        run.agent = to;
        run
    };
    let link = |max, both| RunLimits {
        max_over_link: Some((max, both)),
        ..RunLimits::default()
    };
    store
        .create_run(&delegation("a", "b"), link(1, true))
        .await
        .unwrap();
    let refused = store
        .create_run(&delegation("a", "b"), link(1, true))
        .await
        .unwrap_err();
    assert_eq!(
        refused.to_string(),
        "Agent at capacity (1/1). Try a different agent or handle it yourself."
    );
    let back = store
        .create_run(&delegation("b", "a"), link(1, true))
        .await
        .unwrap_err();
    assert!(
        matches!(back, RunRefused::Children { live: 1, max: 1 }),
        "{back}"
    );
    store
        .create_run(&delegation("b", "a"), link(1, false))
        .await
        .expect("a one-way link does not count the other way");
    let load = RunLimits {
        max_target_load: Some(2),
        ..RunLimits::default()
    };
    store.create_run(&delegation("c", "b"), load).await.unwrap();
    let full = store
        .create_run(&delegation("d", "b"), load)
        .await
        .unwrap_err();
    assert!(
        matches!(full, RunRefused::Children { live: 2, max: 2 }),
        "{full}"
    );
}

/// Issue 24: 1,000 runs started and ended under a limit of 5 children: every one fits (a run
/// that ends frees its slot at once), and no run is left live.
async fn a_thousand_spawn_cycles_never_exhaust_a_slot(config: &StoreConfig) {
    let store = open(config).await;
    let limits = RunLimits::default();
    for i in 0..1000 {
        let run = store
            .create_run(&new_run(None, "busy", ""), limits)
            .await
            .unwrap_or_else(|e| panic!("cycle {i}: {e}"));
        let status = if i % 3 == 0 {
            RunStatus::Cancelled
        } else {
            RunStatus::Completed
        };
        assert!(
            store
                .finish_run(
                    &run.id,
                    Some("gateway-a"),
                    status,
                    "",
                    RunUsage::default(),
                    i % 2 == 0
                )
                .await
                .unwrap()
        );
    }
    let runs = store.child_runs(None, "busy").await.unwrap();
    assert_eq!(runs.len(), 1000);
    assert!(runs.iter().all(|r| !r.status.is_live()));
}
