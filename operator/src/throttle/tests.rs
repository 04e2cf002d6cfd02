//! The throttle's behaviour: buckets, holds, the line's order, sending away and calling back.
#![allow(clippy::unwrap_used)]

use super::line::{Line, Place};
use super::*;

/// A requester of the first stage.
fn cr(id: u64) -> Requester {
    Requester::new(id, 0)
}

/// Whether `id`'s place is kept and its turn still far.
fn far(t: &Throttle, id: u64) -> Option<Duration> {
    match t.turn(&cr(id)) {
        Turn::Far(after) => Some(after),
        _ => None,
    }
}

#[tokio::test]
async fn a_hold_refuses_at_once_for_its_subscription_and_class_only() {
    let t = Throttle::new(Limits::default());
    t.hold("sub-a", Class::Write, Duration::from_secs(7));
    let Err(Refused::Held(left)) = t.acquire("SUB-A", Class::Write, None).await else {
        panic!("a held bucket gives no token");
    };
    assert!(
        left > Duration::from_secs(6) && left <= Duration::from_secs(7),
        "{left:?}"
    );
    assert_eq!(t.waits(), 0, "refused, not waited for");
    // A shorter Retry-After later does not shorten the hold.
    t.hold("sub-a", Class::Write, Duration::from_secs(1));
    assert!(t.held_for("sub-a", Class::Write) > Duration::from_secs(6));
    t.acquire("sub-b", Class::Write, None).await.unwrap();
    t.acquire("sub-a", Class::Read, None).await.unwrap();
    assert_eq!(t.held_for("sub-a", Class::Read), Duration::ZERO);
}

#[cfg(feature = "bench-hooks")]
#[tokio::test]
async fn switched_off_it_never_waits_holds_or_learns() {
    let t = Throttle::new(Limits {
        writes: Bucket {
            burst: 1,
            per_second: 0.001,
        },
        ..Limits::default()
    })
    .switched_off();
    t.hold("s", Class::Write, Duration::from_secs(60));
    for _ in 0..10 {
        t.acquire("s", Class::Write, None).await.unwrap();
    }
    assert_eq!(t.waits(), 0);
    assert_eq!(t.held_for("s", Class::Write), Duration::ZERO);
}

#[tokio::test]
async fn a_hold_ends_and_the_bucket_refills_from_then_on() {
    let t = Throttle::new(Limits::default());
    t.hold("s", Class::Read, Duration::from_millis(50));
    assert!(t.acquire("s", Class::Read, None).await.is_err());
    tokio::time::sleep(Duration::from_millis(60)).await;
    t.acquire("s", Class::Read, None).await.unwrap();
}

#[test]
fn arm_remaining_count_lowers_the_bucket_but_never_raises_it() {
    let t = Throttle::new(Limits::default());
    assert_eq!(t.tokens("s", Class::Write), 180.0, "90 % of 200");
    t.observe_remaining("s", Class::Write, 10);
    assert!(t.tokens("s", Class::Write) < 10.0);
    t.observe_remaining("s", Class::Write, 150);
    assert!(
        t.tokens("s", Class::Write) < 10.0,
        "a higher count is ignored"
    );
    assert_eq!(
        t.tokens("s", Class::Read),
        225.0,
        "other classes keep theirs"
    );
}

#[tokio::test]
async fn burst_then_wait_per_subscription() {
    let t = Throttle::new(Limits {
        reads: Bucket {
            burst: 10,
            per_second: 20.0,
        },
        ..Limits::default()
    });
    // 90 % of a burst of 10 is 9.
    for _ in 0..9 {
        t.acquire("sub-a", Class::Read, None).await.unwrap();
    }
    assert_eq!(t.waits(), 0, "the burst needs no wait");
    t.acquire("sub-a", Class::Read, None).await.unwrap();
    assert_eq!(t.waits(), 1, "the tenth read waits for a refill");
    t.acquire("SUB-B", Class::Read, None).await.unwrap();
    t.acquire("sub-a", Class::Write, None).await.unwrap();
    assert_eq!(
        t.waits(),
        1,
        "other subscriptions and classes have their own buckets"
    );
}

/// A write bucket of one token refilled at `per_second` (90 % of it), its token spent.
async fn spent(per_second: f64) -> Arc<Throttle> {
    let t = Arc::new(Throttle::new(Limits {
        writes: Bucket {
            burst: 1,
            per_second,
        },
        ..Limits::default()
    }));
    t.acquire("s", Class::Write, None).await.unwrap();
    t
}

/// Requests waiting in place, and sent away.
fn line(t: &Throttle) -> (usize, usize) {
    let buckets = t.buckets.lock().unwrap();
    let s = &buckets[&("s".to_owned(), Class::Write)];
    let waiting = s
        .line
        .places()
        .filter(|p| matches!(p, Place::Waiting(_)))
        .count();
    assert_eq!(s.line.places().count() - waiting, s.line.away.len());
    (waiting, s.line.away.len())
}

async fn wait_for_line(t: &Throttle, waiting: usize) {
    while line(t).0 < waiting {
        tokio::task::yield_now().await;
    }
}

/// Ten CRs' writes waiting in line (requesters 1 to 10) for a bucket that gives one token
/// in 1.1 s: nobody is served during a test.
async fn ten_waiting() -> (
    Arc<Throttle>,
    Vec<tokio::task::JoinHandle<Result<(), Refused>>>,
) {
    let t = spent(1.0).await;
    let mut waiters = Vec::new();
    for requester in 1..=10 {
        let t2 = t.clone();
        waiters.push(tokio::spawn(async move {
            t2.acquire("s", Class::Write, Some(&cr(requester))).await
        }));
        wait_for_line(&t, requester as usize).await;
    }
    (t, waiters)
}

#[tokio::test]
async fn waiting_requests_are_served_in_the_order_they_asked() {
    let t = spent(20.0).await;
    let served = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for requester in 1..=5 {
        let (t2, served) = (t.clone(), served.clone());
        tasks.push(tokio::spawn(async move {
            t2.acquire("s", Class::Write, Some(&cr(requester)))
                .await
                .unwrap();
            served.lock().unwrap().push(requester);
        }));
        wait_for_line(&t, requester as usize).await;
    }
    for task in tasks {
        task.await.unwrap();
    }
    assert_eq!(*served.lock().unwrap(), [1, 2, 3, 4, 5]);
    assert_eq!(line(&t), (0, 0), "everyone left the line");
}

#[tokio::test]
async fn writes_of_a_later_stage_go_first_then_first_come() {
    let t = spent(5.0).await;
    let served = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    // (requester, stage) in the order they ask: resource groups of two clusters, then two
    // virtual machines and a subnet of clusters whose networks are further along.
    let asking = [(1, 0), (2, 0), (3, 12), (4, 12), (5, 4)];
    for (n, (id, stage)) in asking.into_iter().enumerate() {
        let (t2, served) = (t.clone(), served.clone());
        tasks.push(tokio::spawn(async move {
            t2.acquire("s", Class::Write, Some(&Requester::new(id, stage)))
                .await
                .unwrap();
            served.lock().unwrap().push(id);
        }));
        wait_for_line(&t, n + 1).await;
    }
    for task in tasks {
        task.await.unwrap();
    }
    assert_eq!(*served.lock().unwrap(), [3, 4, 5, 1, 2]);
    // Reads stay first come whatever the stage.
    let mut l = Line::new(Instant::now());
    let read = |l: &mut Line, stage| t.arrive(l, Class::Read, Some(&Requester::new(9, stage)));
    let (r12, r0) = (read(&mut l, 12), read(&mut l, 0));
    assert!(r12 < r0);
    let write = |l: &mut Line, stage| t.arrive(l, Class::Write, Some(&Requester::new(9, stage)));
    let (w0, w12) = (write(&mut l, 0), write(&mut l, 12));
    assert!(w0 > w12);
    let w3 = write(&mut l, 3);
    assert!(w3 < t.arrive(&mut l, Class::Write, None), "no CR: last");
}

#[tokio::test]
async fn a_write_overtaken_while_it_waits_is_sent_away_with_its_place() {
    let t = spent(1.0).await;
    let t2 = t.clone();
    let first = tokio::spawn(async move { t2.acquire("s", Class::Write, Some(&cr(1))).await });
    wait_for_line(&t, 1).await;
    // Eleven writes of a later stage go ahead of it: ten wait, the eleventh is sent away.
    let mut later = Vec::new();
    for id in 2..=12 {
        let t2 = t.clone();
        later.push(tokio::spawn(async move {
            t2.acquire("s", Class::Write, Some(&Requester::new(id, 12)))
                .await
        }));
    }
    while line(&t) != (11, 1) {
        tokio::task::yield_now().await;
    }
    // When it looks again (its token's time), its turn is far: it gives its reconcile
    // worker back and keeps its place.
    let refused = tokio::time::timeout(Duration::from_secs(5), first)
        .await
        .unwrap()
        .unwrap();
    assert!(
        matches!(refused, Err(Refused::Queued { ahead, .. }) if ahead >= 10),
        "{refused:?}"
    );
    assert!(far(&t, 1).is_some(), "its place is kept");
    for w in &later {
        w.abort();
    }
}

#[tokio::test]
async fn a_request_far_back_is_sent_away_and_comes_back_to_its_place() {
    let (t, waiters) = ten_waiting().await;
    // The eleventh has eleven tokens to wait for: more than waiting in place allows.
    let refused = t.acquire("s", Class::Write, Some(&cr(11))).await;
    let Err(Refused::Queued { after, ahead }) = refused else {
        panic!("expected Queued, got {refused:?}");
    };
    assert_eq!(ahead, 10);
    assert!(after > Duration::from_secs(11), "{after:?}");
    assert_eq!(line(&t), (10, 1));
    // Back early, it is told so without asking for a token; another requester is not in line.
    assert!(far(&t, 11).is_some());
    assert_eq!(t.turn(&cr(99)), Turn::NotInLine);
    // A later request counts it among those ahead ...
    let refused = t.acquire("s", Class::Write, Some(&cr(12))).await;
    assert!(
        matches!(refused, Err(Refused::Queued { ahead: 11, .. })),
        "{refused:?}"
    );
    // ... and the eleventh, back, has its place again: ten ahead, not eleven.
    let refused = t.acquire("s", Class::Write, Some(&cr(11))).await;
    assert!(
        matches!(refused, Err(Refused::Queued { ahead: 10, .. })),
        "{refused:?}"
    );
    assert_eq!(line(&t), (10, 2));
    // A reconcile dropped while it waits leaves the line.
    for w in &waiters {
        w.abort();
    }
    for w in waiters {
        let _ = w.await;
    }
    assert_eq!(line(&t), (0, 2));
    // While ARM's Retry-After holds the bucket, a CR back early is told to wait it out.
    t.hold("s", Class::Write, Duration::from_secs(30));
    let held = far(&t, 11).unwrap();
    assert!(held > Duration::from_secs(29), "{held:?}");
    // A CR that no longer needs its place gives it up.
    t.leave(11);
    assert_eq!(t.turn(&cr(11)), Turn::NotInLine);
    assert_eq!(line(&t), (0, 1));
}

#[tokio::test]
async fn a_first_write_far_back_is_sent_away_before_its_get() {
    let (t, waiters) = ten_waiting().await;
    let near = |requester, first_write| t.turn_near("s", Class::Write, &cr(requester), first_write);
    // A CR that has written before and holds no place is not expected to write: its GET
    // goes ahead.
    assert_eq!(near(12, false), Ok(()));
    assert_eq!(line(&t), (10, 0));
    // A first write would stand behind ten: sent away before its GET, its place kept ...
    assert!(matches!(
        near(11, true),
        Err(Refused::Queued { ahead: 10, .. })
    ));
    assert_eq!(line(&t), (10, 1));
    // ... and the write, when it comes, takes that place.
    let refused = t.acquire("s", Class::Write, Some(&cr(11))).await;
    assert!(
        matches!(refused, Err(Refused::Queued { ahead: 10, .. })),
        "{refused:?}"
    );
    for w in &waiters {
        w.abort();
    }
}

#[tokio::test]
async fn a_first_write_near_its_turn_keeps_a_place_and_counts_one_wait() {
    let t = spent(1.0).await;
    assert_eq!(t.turn_near("s", Class::Write, &cr(1), true), Ok(()));
    assert_eq!(line(&t), (0, 1), "its place is kept while it GETs");
    assert_eq!(t.waits(), 1);
    // The write takes that place and waits there: one wait, not two.
    let t2 = t.clone();
    let write = tokio::spawn(async move { t2.acquire("s", Class::Write, Some(&cr(1))).await });
    wait_for_line(&t, 1).await;
    assert_eq!(line(&t), (1, 0));
    assert_eq!(t.waits(), 1);
    write.abort();
}

/// A requester whose calls back are counted.
fn called_back(id: u64) -> (Requester, Arc<std::sync::atomic::AtomicUsize>) {
    let calls = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = calls.clone();
    let wake = Wake::new(move || {
        counted.fetch_add(1, Ordering::Relaxed);
    });
    let requester = Requester {
        wake: Some(wake),
        ..cr(id)
    };
    (requester, calls)
}

#[tokio::test]
async fn a_cr_sent_away_is_called_back_once_when_its_turn_comes() {
    let (t, waiters) = ten_waiting().await;
    let (eleventh, calls) = called_back(11);
    let refused = t.acquire("s", Class::Write, Some(&eleventh)).await;
    assert!(
        matches!(refused, Err(Refused::Queued { ahead: 10, .. })),
        "{refused:?}"
    );
    // Those ahead give their places up one by one: it is called back when none is left
    // ahead (its token is the next to refill), not while a GET of its own could still be
    // overtaken.
    for (n, w) in waiters.into_iter().enumerate() {
        assert_eq!(calls.load(Ordering::Relaxed), 0, "{} still ahead", 10 - n);
        w.abort();
        let _ = w.await;
    }
    assert_eq!(calls.load(Ordering::Relaxed), 1);
    // The bucket looked at again: not called twice.
    t.tokens("s", Class::Write);
    assert_eq!(calls.load(Ordering::Relaxed), 1);
    // Back, it finds its turn near and goes on to its request.
    assert_eq!(t.turn(&eleventh), Turn::Near);
}

#[tokio::test]
async fn a_cr_back_to_find_its_turn_still_far_is_told_to_come_back_later_each_time() {
    let (t, waiters) = ten_waiting().await;
    let (eleventh, _) = called_back(11);
    let Err(Refused::Queued { after, .. }) = t.acquire("s", Class::Write, Some(&eleventh)).await
    else {
        panic!("sent away");
    };
    // The tokens it waits for take `after` to refill; each time it comes back to find its
    // turn still far (writes of later stages went ahead), it is told to come back twice as
    // late — up to eight times — and called back meanwhile when its turn comes.
    let mut told = vec![after];
    for _ in 0..5 {
        let Turn::Far(after) = t.turn(&eleventh) else {
            panic!("still far");
        };
        told.push(after);
    }
    let ratios: Vec<f64> = told
        .windows(2)
        .map(|w| w[1].as_secs_f64() / w[0].as_secs_f64())
        .collect();
    for r in &ratios[..3] {
        assert!((1.9..=2.0).contains(r), "{told:?}");
    }
    for r in &ratios[3..] {
        assert!((0.9..=1.0).contains(r), "at most eight times: {told:?}");
    }
    for w in &waiters {
        w.abort();
    }
}

#[tokio::test]
async fn a_read_waits_in_line_however_far_back() {
    let t = Arc::new(Throttle::new(Limits {
        reads: Bucket {
            burst: 1,
            per_second: 1.0,
        },
        ..Limits::default()
    }));
    t.acquire("s", Class::Read, None).await.unwrap();
    let mut readers = Vec::new();
    for requester in 1..=12 {
        let t2 = t.clone();
        readers.push(tokio::spawn(async move {
            t2.acquire("s", Class::Read, Some(&cr(requester))).await
        }));
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    // None was refused: all twelve still wait, none sent away.
    assert!(readers.iter().all(|r| !r.is_finished()));
    let buckets = t.buckets.lock().unwrap();
    let reads = &buckets[&("s".to_owned(), Class::Read)];
    assert_eq!(
        (reads.line.places().count(), reads.line.away.len()),
        (12, 0)
    );
    drop(buckets);
    for r in &readers {
        r.abort();
    }
}

/// A namespace that fills a line does not hold another's writes behind all of its own: the
/// other's first write takes the next turn.
#[tokio::test]
async fn another_namespaces_write_is_not_held_behind_a_namespace_that_fills_the_line() {
    let (t, waiters) = ten_waiting().await;
    // The same namespace's eleventh stands behind its ten: sent away.
    let same = t.acquire("s", Class::Write, Some(&cr(11))).await;
    assert!(
        matches!(same, Err(Refused::Queued { ahead: 10, .. })),
        "{same:?}"
    );
    // Another namespace's first write stands behind one of them: near enough to keep its place
    // for the write its GET precedes, rather than be sent away behind the eleven.
    let other = Requester {
        tenant: 2,
        ..cr(12)
    };
    assert_eq!(t.turn_near("s", Class::Write, &other, true), Ok(()));
    assert_eq!(line(&t), (10, 2));
    for w in &waiters {
        w.abort();
    }
}
