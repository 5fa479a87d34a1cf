//! Issue 25: teams, their task board and mailbox, on both engines: prerequisites checked and
//! honoured (a failed one keeps its dependents blocked), claims race-safe with one winner of
//! 50, an expired claim back on the board with its owner cleared, messages read once.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use talon_store::{NewTask, Store, StoreConfig, TaskFilter, TaskOrder, TaskStatus};

suite!(
    teams_have_a_lead_and_members_and_an_agent_may_be_in_several,
    prerequisites_are_checked_and_only_success_unblocks,
    fifty_claimers_of_one_task_have_one_winner,
    an_expired_claim_returns_to_the_board_without_its_owner,
    only_the_owner_completes_and_the_board_lists_and_searches,
    messages_reach_teammates_once,
    another_users_tasks_and_messages_are_not_there,
    h36_3_a_prerequisite_is_never_another_users_task,
);

const FAR: i64 = i64::MAX / 2;

async fn team(config: &StoreConfig) -> Store {
    let store = Store::open(config).await.unwrap();
    store
        .create_team("alpha", "lead", "builds things")
        .await
        .unwrap();
    for member in ["ann", "bob", "cy"] {
        store
            .add_team_member("alpha", member, "builder")
            .await
            .unwrap();
    }
    store
}

fn new_task<'a>(subject: &'a str, blocked_by: &'a [i64]) -> NewTask<'a> {
    NewTask {
        team: "alpha",
        subject,
        description: "",
        priority: 0,
        blocked_by,
        created_by: "lead",
        lead_session: "lead-session",
        user: "",
    }
}

async fn teams_have_a_lead_and_members_and_an_agent_may_be_in_several(config: &StoreConfig) {
    let store = team(config).await;
    let taken = store.create_team("alpha", "other", "").await.unwrap_err();
    assert!(taken.to_string().contains("exists already"), "{taken}");
    let lead_as_member = store
        .add_team_member("alpha", "lead", "")
        .await
        .unwrap_err();
    assert!(
        lead_as_member.to_string().contains("leads alpha"),
        "{lead_as_member}"
    );
    store.create_team("beta", "lead", "").await.unwrap();
    store
        .add_team_member("beta", "ann", "reviewer")
        .await
        .unwrap();
    let of_lead: Vec<String> = store
        .teams_of("lead")
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name)
        .collect();
    assert_eq!(of_lead, ["alpha", "beta"]);
    let of_ann = store.teams_of("ann").await.unwrap();
    assert_eq!(of_ann.len(), 2);
    assert!(of_ann[1].has_member("ann") && !of_ann[1].has_member("bob"));
    assert!(store.on_a_team("lead").await.unwrap() && store.on_a_team("ann").await.unwrap());
    assert!(!store.on_a_team("mallory").await.unwrap());
    assert!(store.remove_team_member("beta", "ann").await.unwrap());
    assert_eq!(store.teams_of("ann").await.unwrap().len(), 1);
    assert!(store.delete_team("beta").await.unwrap());
    assert!(store.team("beta").await.unwrap().is_none());
}

async fn prerequisites_are_checked_and_only_success_unblocks(config: &StoreConfig) {
    let store = team(config).await;
    let a = store.create_task(&new_task("design", &[])).await.unwrap();
    let b = store
        .create_task(&new_task("build", &[a.id]))
        .await
        .unwrap();
    let c = store
        .create_task(&new_task("ship", &[a.id, b.id]))
        .await
        .unwrap();
    assert_eq!(a.status, TaskStatus::Pending);
    assert_eq!(
        (b.status, c.status),
        (TaskStatus::Blocked, TaskStatus::Blocked)
    );
    assert_eq!(c.blocked_by, [a.id, b.id]);
    let unknown = store
        .create_task(&new_task("x", &[9_999]))
        .await
        .unwrap_err();
    assert!(
        unknown
            .to_string()
            .contains("#9999, which is not on alpha's board"),
        "{unknown}"
    );
    store.create_team("beta", "lead", "").await.unwrap();
    let mut elsewhere = new_task("y", &[]);
    elsewhere.team = "beta";
    let other = store.create_task(&elsewhere).await.unwrap();
    assert!(
        store
            .create_task(&new_task("z", &[other.id]))
            .await
            .is_err(),
        "another board's task"
    );

    // Only A can be claimed; completing it unblocks B, not C (B has not completed).
    let claimed = store
        .claim_task("alpha", "ann", None, FAR, None)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(claimed.id, a.id);
    assert!(
        store
            .claim_task("alpha", "bob", None, FAR, None)
            .await
            .unwrap()
            .is_none()
    );
    let (done, unblocked) = store
        .complete_task("alpha", a.id, "ann", "", "the design")
        .await
        .unwrap();
    assert_eq!(done.status, TaskStatus::Completed);
    assert_eq!(unblocked.iter().map(|t| t.id).collect::<Vec<_>>(), [b.id]);

    // B fails: C stays blocked and is named for the lead; nothing depending on B can be posted.
    store
        .claim_task("alpha", "bob", Some(b.id), FAR, None)
        .await
        .unwrap()
        .unwrap();
    let (failed, still_blocked) = store
        .end_task(
            "alpha",
            b.id,
            TaskStatus::Failed,
            Some("bob"),
            "",
            "the build broke",
        )
        .await
        .unwrap();
    assert_eq!(failed.status, TaskStatus::Failed);
    assert_eq!(
        still_blocked.iter().map(|t| t.id).collect::<Vec<_>>(),
        [c.id]
    );
    assert_eq!(
        store.task("alpha", c.id).await.unwrap().unwrap().status,
        TaskStatus::Blocked
    );
    let after_failure = store
        .create_task(&new_task("w", &[b.id]))
        .await
        .unwrap_err();
    assert!(
        after_failure.to_string().contains("prerequisite #"),
        "{after_failure}"
    );
    assert!(
        store
            .claim_task("alpha", "cy", None, FAR, None)
            .await
            .unwrap()
            .is_none()
    );
}

async fn fifty_claimers_of_one_task_have_one_winner(config: &StoreConfig) {
    let store = team(config).await;
    let task = store.create_task(&new_task("the one", &[])).await.unwrap();
    let owners: Vec<String> = (0..50).map(|i| format!("member-{i}")).collect();
    let claims = futures::future::join_all(
        owners
            .iter()
            .map(|owner| store.claim_task("alpha", owner, Some(task.id), FAR, None)),
    )
    .await;
    let winners: Vec<_> = claims.into_iter().filter_map(|c| c.unwrap()).collect();
    assert_eq!(winners.len(), 1, "{winners:?}");
    let stored = store.task("alpha", task.id).await.unwrap().unwrap();
    assert_eq!(stored.owner, winners[0].owner);
    assert_eq!(stored.dispatches, 1);
}

async fn an_expired_claim_returns_to_the_board_without_its_owner(config: &StoreConfig) {
    let store = team(config).await;
    let task = store.create_task(&new_task("flaky", &[])).await.unwrap();
    for (round, member) in ["ann", "bob"].into_iter().enumerate() {
        let claimed = store
            .claim_task("alpha", member, None, 0, None)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(claimed.dispatches, i64::try_from(round).unwrap() + 1);
        let released = store.release_expired_tasks().await.unwrap();
        assert_eq!(released.len(), 1);
        assert_eq!(released[0].status, TaskStatus::Pending);
        assert_eq!(released[0].owner, "", "the owner is cleared");
    }
    // The third dispatch that does not finish fails the task, saying why.
    store
        .claim_task("alpha", "cy", None, 0, None)
        .await
        .unwrap()
        .unwrap();
    let released = store.release_expired_tasks().await.unwrap();
    assert_eq!(released[0].status, TaskStatus::Failed);
    assert!(
        released[0].result.contains("dispatched 3 times"),
        "{}",
        released[0].result
    );
    assert!(
        store
            .claim_task("alpha", "ann", Some(task.id), FAR, None)
            .await
            .unwrap()
            .is_none()
    );
    // A run's release is conditional on it still holding the task.
    let other = store.create_task(&new_task("steady", &[])).await.unwrap();
    store
        .claim_task("alpha", "ann", Some(other.id), FAR, None)
        .await
        .unwrap()
        .unwrap();
    store.set_task_run(other.id, "run-1").await.unwrap();
    assert!(
        store
            .release_task(other.id, Some("run-2"), "x")
            .await
            .unwrap()
            .is_none()
    );
    let back = store
        .release_task(other.id, Some("run-1"), "x")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (back.status, back.owner.as_str()),
        (TaskStatus::Pending, "")
    );
}

async fn only_the_owner_completes_and_the_board_lists_and_searches(config: &StoreConfig) {
    let store = team(config).await;
    let mut low = new_task("write the parser", &[]);
    low.description = "tokens and grammar for the config language";
    let low = store.create_task(&low).await.unwrap();
    let mut high = new_task("fix the login page", &[]);
    high.priority = 5;
    high.description = "users cannot sign in with long passwords";
    let high = store.create_task(&high).await.unwrap();
    let claimed = store
        .claim_task("alpha", "ann", None, FAR, None)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(claimed.id, high.id, "highest priority first");
    let not_yours = store
        .complete_task("alpha", high.id, "bob", "", "done")
        .await
        .unwrap_err();
    assert!(
        not_yours.to_string().contains("claimed by ann"),
        "{not_yours}"
    );
    let not_claimed = store
        .complete_task("alpha", low.id, "bob", "", "done")
        .await
        .unwrap_err();
    assert!(
        not_claimed.to_string().contains("is pending"),
        "{not_claimed}"
    );
    store
        .complete_task("alpha", high.id, "ann", "", "fixed")
        .await
        .unwrap();
    let ids = |tasks: Vec<talon_store::TaskRecord>| tasks.iter().map(|t| t.id).collect::<Vec<_>>();
    assert_eq!(
        ids(store
            .tasks("alpha", None, TaskFilter::Active, TaskOrder::Priority, 50)
            .await
            .unwrap()),
        [low.id]
    );
    assert_eq!(
        ids(store
            .tasks(
                "alpha",
                None,
                TaskFilter::Completed,
                TaskOrder::Priority,
                50
            )
            .await
            .unwrap()),
        [high.id]
    );
    assert_eq!(
        ids(store
            .tasks("alpha", None, TaskFilter::All, TaskOrder::Newest, 50)
            .await
            .unwrap()),
        [high.id, low.id]
    );
    assert_eq!(
        ids(store
            .search_tasks("alpha", "", "grammar", 10)
            .await
            .unwrap()),
        [low.id]
    );
    assert_eq!(
        ids(store
            .search_tasks("alpha", "", "passwords login", 10)
            .await
            .unwrap()),
        [high.id]
    );
    assert!(
        store
            .search_tasks("beta", "", "grammar", 10)
            .await
            .unwrap()
            .is_empty()
    );
    let (cancelled, _) = store
        .end_task(
            "alpha",
            low.id,
            TaskStatus::Cancelled,
            None,
            "",
            "not needed",
        )
        .await
        .unwrap();
    assert_eq!(cancelled.status, TaskStatus::Cancelled);
    let again = store
        .end_task("alpha", low.id, TaskStatus::Cancelled, None, "", "again")
        .await
        .unwrap_err();
    assert!(again.to_string().contains("ended already"), "{again}");
}

async fn messages_reach_teammates_once(config: &StoreConfig) {
    let store = team(config).await;
    let stranger = store
        .send_team_message("alpha", "lead", "mallory", "", "hi")
        .await
        .unwrap_err();
    assert!(
        stranger
            .to_string()
            .contains("mallory is not on team alpha"),
        "{stranger}"
    );
    store
        .send_team_message(
            "alpha",
            "lead",
            "ann",
            "",
            "please claim a task from the board",
        )
        .await
        .unwrap();
    assert_eq!(
        store
            .broadcast_team_message("alpha", "ann", "", "I am on #1")
            .await
            .unwrap(),
        3,
        "the lead, bob and cy"
    );
    assert_eq!(
        store
            .unread_team_messages("alpha", "ann", "")
            .await
            .unwrap(),
        1
    );
    let reads =
        futures::future::join_all((0..4).map(|_| store.read_team_messages("alpha", "bob", "", 10)))
            .await;
    let got: usize = reads.into_iter().map(|r| r.unwrap().len()).sum();
    assert_eq!(got, 1, "read once, however many readers");
    let ann = store
        .read_team_messages("alpha", "ann", "", 10)
        .await
        .unwrap();
    assert_eq!(ann.len(), 1);
    assert_eq!((ann[0].sender.as_str(), ann[0].broadcast), ("lead", false));
    assert!(
        store
            .read_team_messages("alpha", "ann", "", 10)
            .await
            .unwrap()
            .is_empty()
    );
    // A member that left keeps its messages until read.
    store
        .send_team_message("alpha", "lead", "cy", "", "wrap up")
        .await
        .unwrap();
    store.remove_team_member("alpha", "cy").await.unwrap();
    assert_eq!(
        store.unread_team_messages("alpha", "cy", "").await.unwrap(),
        2
    );
}

/// A task and a message belong to the user whose conversation made them: in another user's
/// calls they are not listed, found, claimed, ended or read.
async fn another_users_tasks_and_messages_are_not_there(config: &StoreConfig) {
    let store = team(config).await;
    let mut secret = new_task("alice's launch", &[]);
    secret.user = "alice";
    secret.description = "confidential merger plans";
    let task = store.create_task(&secret).await.unwrap();
    let listed = store
        .tasks("alpha", Some("bob"), TaskFilter::All, TaskOrder::Newest, 50)
        .await
        .unwrap();
    assert!(listed.is_empty(), "{listed:?}");
    assert!(
        store
            .search_tasks("alpha", "bob", "merger", 10)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        store
            .search_tasks("alpha", "alice", "merger", 10)
            .await
            .unwrap()
            .len(),
        1
    );
    assert!(
        store
            .claim_task("alpha", "ann", Some(task.id), FAR, Some("bob"))
            .await
            .unwrap()
            .is_none()
    );
    let cancel = store
        .end_task(
            "alpha",
            task.id,
            TaskStatus::Cancelled,
            None,
            "bob",
            "mine now",
        )
        .await
        .unwrap_err();
    assert!(cancel.to_string().contains("there is no task"), "{cancel}");
    store
        .claim_task("alpha", "ann", Some(task.id), FAR, Some("alice"))
        .await
        .unwrap()
        .unwrap();
    let complete = store
        .complete_task("alpha", task.id, "ann", "bob", "done")
        .await
        .unwrap_err();
    assert!(
        complete.to_string().contains("there is no task"),
        "{complete}"
    );
    store
        .send_team_message("alpha", "lead", "ann", "alice", "the merger is on")
        .await
        .unwrap();
    assert!(
        store
            .read_team_messages("alpha", "ann", "bob", 10)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        store
            .unread_team_messages("alpha", "ann", "bob")
            .await
            .unwrap(),
        0
    );
    assert_eq!(
        store
            .read_team_messages("alpha", "ann", "alice", 10)
            .await
            .unwrap()
            .len(),
        1
    );
}

/// Issue 36 (3): `blocked_by` (and TaskCreate's `blockedBy`) may name only the caller's own
/// tasks: another user's task is refused as absent, so its result is never pasted into the
/// caller's member run.
async fn h36_3_a_prerequisite_is_never_another_users_task(config: &StoreConfig) {
    let store = team(config).await;
    let mut secret = new_task("alice's research", &[]);
    secret.user = "alice";
    let alices = store.create_task(&secret).await.unwrap();
    let blockers = [alices.id];
    let mut probe = new_task("bob's summary", &blockers);
    probe.user = "bob";
    let refused = store.create_task(&probe).await.unwrap_err();
    assert!(
        refused.to_string().contains("not on alpha's board"),
        "{refused}"
    );
    // Her own may: it waits for her research.
    let mut own = new_task("alice's summary", &blockers);
    own.user = "alice";
    assert_eq!(
        store.create_task(&own).await.unwrap().status,
        TaskStatus::Blocked
    );
}
