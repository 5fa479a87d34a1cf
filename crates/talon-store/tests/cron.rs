//! Issue 27's scheduled jobs on both engines: each user's jobs their own, due jobs claimed by
//! exactly one of two gateways at once, a dead gateway's claim taken again after its lease
//! (never swept), the next time after each run, and the history kept and capped.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashSet;
use std::time::Duration;

use talon_store::{
    CronDelivery, CronJobPatch, CronOutcome, CronRunStatus, MissedPolicy, NewCronJob, Schedule,
    ScheduleKind, Store, StoreConfig,
};

suite!(
    jobs_are_their_users_own,
    two_gateways_never_claim_one_job,
    an_expired_lease_is_claimed_again,
    each_run_sets_the_next_time_and_history_is_capped,
    changes_reschedule_and_wake_times_follow,
    a_chat_to_deliver_to_is_kept_and_cleared,
    one_owner_holds_a_lease_until_it_runs_out,
);

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

fn every(value: &str) -> Schedule {
    Schedule::parse(ScheduleKind::Every, value, "").unwrap()
}

fn past() -> Schedule {
    Schedule::parse(ScheduleKind::At, "2020-01-01T00:00:00Z", "").unwrap()
}

fn new_job<'a>(user: &'a str, name: &'a str, schedule: Schedule) -> NewCronJob<'a> {
    NewCronJob {
        user,
        agent: "helper",
        name,
        schedule,
        message: "summarise the news",
        session_key: "",
        delete_after_run: false,
        enabled: true,
        missed: MissedPolicy::RunOnce,
        delivery: None,
    }
}

fn ok<'a>(run_id: &'a str) -> CronOutcome<'a> {
    CronOutcome {
        status: CronRunStatus::Ok,
        result: "done",
        run_id,
        started_at: now(),
    }
}

async fn jobs_are_their_users_own(config: &StoreConfig) {
    let store = Store::open(config).await.unwrap();
    let job = store
        .add_cron_job(&new_job("alice", "news", every("1h")))
        .await
        .unwrap();
    assert!(job.id.starts_with("cron-"), "{}", job.id);
    assert!(job.next_run_at > now() + 3_500_000, "an hour from now");
    // Bob may use the same name; he sees only his own.
    store
        .add_cron_job(&new_job("bob", "news", every("2h")))
        .await
        .unwrap();
    let taken = store
        .add_cron_job(&new_job("alice", "news", every("2h")))
        .await
        .unwrap_err()
        .to_string();
    assert!(taken.contains("taken"), "{taken}");
    let bobs = store.cron_jobs("bob").await.unwrap();
    assert_eq!(bobs.len(), 1);
    assert_ne!(bobs[0].id, job.id);
    // By id or name, Bob cannot read, change, run, list the history of or remove Alice's job.
    for key in [job.id.as_str()] {
        assert!(store.cron_job("bob", key).await.unwrap().is_none());
        assert!(
            store
                .update_cron_job("bob", key, &CronJobPatch::default())
                .await
                .is_err()
        );
        assert!(store.request_cron_run("bob", key, true).await.is_err());
        assert!(store.cron_runs("bob", key, 10).await.unwrap().is_none());
        assert!(!store.remove_cron_job("bob", key).await.unwrap());
    }
    assert!(store.cron_job("alice", "news").await.unwrap().is_some());
    assert_eq!(store.cron_counts("alice").await.unwrap(), (1, 1, 0));
    assert!(store.remove_cron_job("alice", "news").await.unwrap());
    assert!(store.cron_jobs("alice").await.unwrap().is_empty());
    assert_eq!(store.cron_jobs("bob").await.unwrap().len(), 1);
    // Bad input says what to do.
    let mut bad = new_job("alice", "x", every("1h"));
    bad.message = " ";
    let e = store.add_cron_job(&bad).await.unwrap_err().to_string();
    assert!(e.contains("say what the agent should do"), "{e}");
}

async fn two_gateways_never_claim_one_job(config: &StoreConfig) {
    let a = Store::open(config).await.unwrap();
    let b = Store::open(config).await.unwrap();
    let mut ids = HashSet::new();
    for i in 0..60 {
        let name = format!("job {i}");
        let user = format!("user{}", i % 3);
        ids.insert(
            a.add_cron_job(&new_job(&user, &name, past()))
                .await
                .unwrap()
                .id,
        );
    }
    let claim_all = |store: Store, owner: &'static str| async move {
        let mut mine = Vec::new();
        loop {
            let until = now() + 60_000;
            let claimed = store.claim_due_cron_jobs(owner, until, 4).await.unwrap();
            if claimed.is_empty() {
                return mine;
            }
            for job in claimed {
                assert_eq!(job.lease_owner, owner);
                assert!(job.claim_due > 0, "a scheduled run");
                mine.push(job.id);
            }
        }
    };
    let (got_a, got_b) = tokio::join!(claim_all(a.clone(), "gw-a"), claim_all(b.clone(), "gw-b"));
    let set_a: HashSet<_> = got_a.iter().cloned().collect();
    let set_b: HashSet<_> = got_b.iter().cloned().collect();
    assert_eq!(set_a.len(), got_a.len(), "A claimed no job twice");
    assert_eq!(set_b.len(), got_b.len(), "B claimed no job twice");
    assert!(set_a.is_disjoint(&set_b), "no job claimed by both");
    assert_eq!(&set_a | &set_b, ids, "every due job claimed");
    // Held jobs are not claimed again while their lease runs.
    assert!(
        a.claim_due_cron_jobs("gw-c", now() + 1000, 100)
            .await
            .unwrap()
            .is_empty()
    );
    // B cannot record the end of A's claim.
    let first_a = got_a.first().or(got_b.first()).unwrap().clone();
    let holder = if set_a.contains(&first_a) {
        "gw-a"
    } else {
        "gw-b"
    };
    let other = if holder == "gw-a" { "gw-b" } else { "gw-a" };
    assert!(!b.finish_cron_job(&first_a, other, &ok("")).await.unwrap());
    assert!(a.finish_cron_job(&first_a, holder, &ok("")).await.unwrap());
}

async fn an_expired_lease_is_claimed_again(config: &StoreConfig) {
    let a = Store::open(config).await.unwrap();
    let b = Store::open(config).await.unwrap();
    let job = a
        .add_cron_job(&new_job("alice", "nightly", past()))
        .await
        .unwrap();
    let claimed = a
        .claim_due_cron_jobs("gw-a", now() + 300, 10)
        .await
        .unwrap();
    assert_eq!(claimed.len(), 1);
    assert!(a.set_cron_run(&job.id, "gw-a", "run-123").await.unwrap());
    assert!(
        b.claim_due_cron_jobs("gw-b", now() + 60_000, 10)
            .await
            .unwrap()
            .is_empty()
    );
    // A dies: it stops renewing. Nothing is swept; B claims the job once the lease ran out,
    // and finds the run A started.
    tokio::time::sleep(Duration::from_millis(400)).await;
    let again = b
        .claim_due_cron_jobs("gw-b", now() + 60_000, 10)
        .await
        .unwrap();
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].run_id, "run-123");
    assert_eq!(again[0].lease_owner, "gw-b");
    // A, back from a stall, can neither renew nor end it.
    assert_eq!(
        a.renew_cron_leases("gw-a", now() + 60_000).await.unwrap(),
        0
    );
    assert!(
        !a.finish_cron_job(&job.id, "gw-a", &ok("run-123"))
            .await
            .unwrap()
    );
    assert_eq!(
        b.renew_cron_leases("gw-b", now() + 60_000).await.unwrap(),
        1
    );
    assert!(
        b.finish_cron_job(&job.id, "gw-b", &ok("run-123"))
            .await
            .unwrap()
    );
    let runs = b.cron_runs("alice", &job.id, 10).await.unwrap().unwrap();
    assert_eq!(runs.len(), 1, "one run recorded, not two");
    assert_eq!(runs[0].run_id, "run-123");
}

async fn each_run_sets_the_next_time_and_history_is_capped(config: &StoreConfig) {
    let store = Store::open(config).await.unwrap();
    // A recurring job: each scheduled run moves it to the next time after now.
    let job = store
        .add_cron_job(&new_job("alice", "often", every("10m")))
        .await
        .unwrap();
    store
        .execute_admin(&format!(
            "UPDATE cron_jobs SET next_run_at = {} WHERE id = '{}'",
            now() - 3 * 3_600_000,
            job.id
        ))
        .await
        .unwrap();
    for i in 0..103 {
        let claimed = if i == 0 {
            store
                .claim_due_cron_jobs("gw", now() + 60_000, 10)
                .await
                .unwrap()
        } else {
            // Forced runs from here on: the schedule stays where it is.
            assert!(
                store
                    .request_cron_run("alice", "often", true)
                    .await
                    .unwrap()
                    .1
            );
            let claimed = store
                .claim_due_cron_jobs("gw", now() + 60_000, 10)
                .await
                .unwrap();
            assert_eq!(claimed[0].claim_due, 0, "forced");
            claimed
        };
        assert_eq!(claimed.len(), 1);
        let run = format!("run-{i}");
        assert!(
            store
                .finish_cron_job(&job.id, "gw", &ok(&run))
                .await
                .unwrap()
        );
    }
    let after = store.cron_job("alice", &job.id).await.unwrap().unwrap();
    let n = now();
    assert!(
        after.next_run_at > n - 5_000 && after.next_run_at <= n + 600_000,
        "three hours late: one run, then the next time within the interval"
    );
    assert_eq!((after.last_status.as_str(), after.run_requested), ("ok", 0));
    assert!(after.lease_owner.is_empty());
    let runs = store
        .cron_runs("alice", "often", 1000)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(runs.len(), 100, "the newest 100 kept");
    assert_eq!(runs[0].run_id, "run-102");
    assert_eq!(runs[99].run_id, "run-3");
    assert!(
        store
            .claim_due_cron_jobs("gw", now() + 1000, 10)
            .await
            .unwrap()
            .is_empty()
    );

    // An `at` job ends after its run: disabled, or deleted when it asks to be.
    let once = store
        .add_cron_job(&new_job("alice", "once", past()))
        .await
        .unwrap();
    let mut gone = new_job("alice", "gone", past());
    gone.delete_after_run = true;
    let gone = store.add_cron_job(&gone).await.unwrap();
    let claimed = store
        .claim_due_cron_jobs("gw", now() + 60_000, 10)
        .await
        .unwrap();
    assert_eq!(claimed.len(), 2);
    let failed = CronOutcome {
        status: CronRunStatus::Error,
        result: &"x".repeat(10_000),
        run_id: "run-x",
        started_at: now(),
    };
    assert!(
        store
            .finish_cron_job(&once.id, "gw", &failed)
            .await
            .unwrap()
    );
    assert!(
        store
            .finish_cron_job(&gone.id, "gw", &ok(""))
            .await
            .unwrap()
    );
    let once = store.cron_job("alice", "once").await.unwrap().unwrap();
    assert!(!once.enabled && once.next_run_at == 0);
    assert_eq!(once.last_status, "error");
    let runs = store.cron_runs("alice", "once", 10).await.unwrap().unwrap();
    assert_eq!(runs[0].result.chars().count(), 4000, "results are capped");
    assert!(store.cron_job("alice", "gone").await.unwrap().is_none());

    // A skipped run (missed, policy skip) is recorded and the job moves on.
    let mut skip = new_job("alice", "skipper", every("1h"));
    skip.missed = MissedPolicy::Skip;
    let skip = store.add_cron_job(&skip).await.unwrap();
    store
        .execute_admin(&format!(
            "UPDATE cron_jobs SET next_run_at = 5 WHERE id = '{}'",
            skip.id
        ))
        .await
        .unwrap();
    let claimed = store
        .claim_due_cron_jobs("gw", now() + 60_000, 10)
        .await
        .unwrap();
    assert_eq!((claimed.len(), claimed[0].missed), (1, MissedPolicy::Skip));
    let skipped = CronOutcome {
        status: CronRunStatus::Skipped,
        result: "missed while no gateway ran",
        run_id: "",
        started_at: now(),
    };
    assert!(
        store
            .finish_cron_job(&skip.id, "gw", &skipped)
            .await
            .unwrap()
    );
    let skip = store.cron_job("alice", "skipper").await.unwrap().unwrap();
    assert!(skip.next_run_at > now());
    assert_eq!(skip.last_status, "skipped");
}

async fn changes_reschedule_and_wake_times_follow(config: &StoreConfig) {
    let store = Store::open(config).await.unwrap();
    assert_eq!(store.next_cron_due().await.unwrap(), None);
    let job = store
        .add_cron_job(&new_job("alice", "daily", every("1d")))
        .await
        .unwrap();
    assert_eq!(store.next_cron_due().await.unwrap(), Some(job.next_run_at));
    let (_, asked) = store
        .request_cron_run("alice", "daily", false)
        .await
        .unwrap();
    assert!(!asked, "not due: mode due does nothing");
    let cron = Schedule::parse(ScheduleKind::Cron, "0 9 * * *", "Europe/Berlin").unwrap();
    let patch = CronJobPatch {
        schedule: Some(cron.clone()),
        name: Some("morning".into()),
        missed: Some(MissedPolicy::Skip),
        ..CronJobPatch::default()
    };
    let changed = store
        .update_cron_job("alice", "daily", &patch)
        .await
        .unwrap();
    assert_eq!(changed.schedule, cron);
    assert_eq!(changed.name, "morning");
    assert_eq!(changed.next_run_at, cron.first_run(now()).unwrap());
    let off = CronJobPatch {
        enabled: Some(false),
        ..CronJobPatch::default()
    };
    let off = store
        .update_cron_job("alice", "morning", &off)
        .await
        .unwrap();
    assert_eq!((off.enabled, off.next_run_at), (false, 0));
    assert_eq!(store.next_cron_due().await.unwrap(), None);
    // A forced run of a disabled job runs it (and wakes the schedulers at once).
    let (_, asked) = store
        .request_cron_run("alice", &job.id, true)
        .await
        .unwrap();
    assert!(asked);
    assert!(store.next_cron_due().await.unwrap().unwrap() <= now());
    let claimed = store
        .claim_due_cron_jobs("gw", now() + 60_000, 10)
        .await
        .unwrap();
    assert_eq!(claimed.len(), 1);
    assert_eq!(
        store.next_cron_due().await.unwrap(),
        None,
        "held: not counted"
    );
    assert!(store.finish_cron_job(&job.id, "gw", &ok("")).await.unwrap());
    let after = store.cron_job("alice", &job.id).await.unwrap().unwrap();
    assert_eq!(
        (after.enabled, after.next_run_at, after.run_requested),
        (false, 0, 0)
    );
}

async fn a_chat_to_deliver_to_is_kept_and_cleared(config: &StoreConfig) {
    let store = Store::open(config).await.unwrap();
    let delivery = CronDelivery {
        channel: "tg".into(),
        to: "-100/7".into(),
        pinned: true,
    };
    let mut new = new_job("alice", "report", every("1h"));
    new.delivery = Some(delivery.clone());
    let job = store.add_cron_job(&new).await.unwrap();
    assert_eq!(job.delivery.as_ref(), Some(&delivery));
    assert_eq!(delivery.chat_and_thread(), ("-100", Some("7")));
    let read = store.cron_job("alice", "report").await.unwrap().unwrap();
    assert_eq!(read.delivery, Some(delivery));
    // A malformed chat is refused; clearing stops delivery.
    let mut bad = new_job("alice", "bad", every("1h"));
    bad.delivery = Some(CronDelivery {
        channel: "tg".into(),
        to: " ".into(),
        pinned: false,
    });
    assert!(store.add_cron_job(&bad).await.is_err());
    bad.delivery = Some(CronDelivery {
        channel: "tg".into(),
        to: "-100/".into(),
        pinned: false,
    });
    assert!(
        store.add_cron_job(&bad).await.is_err(),
        "a topic left empty"
    );
    let patch = CronJobPatch {
        delivery: Some(None),
        ..CronJobPatch::default()
    };
    let cleared = store
        .update_cron_job("alice", &job.id, &patch)
        .await
        .unwrap();
    assert_eq!(cleared.delivery, None);
    let read = store.cron_job("alice", &job.id).await.unwrap().unwrap();
    assert_eq!(read.delivery, None);
}

async fn one_owner_holds_a_lease_until_it_runs_out(config: &StoreConfig) {
    let store = Store::open(config).await.unwrap();
    let soon = now() + 60_000;
    assert!(store.hold_lease("bot", "gw-a", soon).await.unwrap());
    // Renewed by its holder, refused to another while it runs.
    assert!(store.hold_lease("bot", "gw-a", soon + 1).await.unwrap());
    assert!(!store.hold_lease("bot", "gw-b", soon).await.unwrap());
    // Another lease is another name.
    assert!(store.hold_lease("other-bot", "gw-b", soon).await.unwrap());
    // Run out: taken over; the old holder cannot renew it.
    store
        .execute_admin("UPDATE leases SET until_ms = 1 WHERE name = 'bot'")
        .await
        .unwrap();
    assert!(store.hold_lease("bot", "gw-b", soon).await.unwrap());
    assert!(!store.hold_lease("bot", "gw-a", soon).await.unwrap());
    // Released by its holder only.
    store.release_lease("bot", "gw-a").await.unwrap();
    assert!(!store.hold_lease("bot", "gw-a", soon).await.unwrap());
    store.release_lease("bot", "gw-b").await.unwrap();
    assert!(store.hold_lease("bot", "gw-a", soon).await.unwrap());
}
