//! What the loop remembers of each object between its reconciles, beside what `decide` sees in
//! the object and in Azure: one type, so that a reader finds all of it in one place and an
//! object's deletion forgets all of it at once ([`Memory::forget`]). Each memory covers a moment
//! the watch has not caught up with yet, or guards against a loop; none is needed after a
//! restart, when the CR's status and annotations (written by the same reconciles) say the same.
//! Keyed by `<namespace>/<CloudKind>/<name>`.

use std::time::{Duration, Instant};

use crate::per_object::PerObject;
use crate::reported::Reported;

/// The loop's memory of every object (`Context::memory`).
#[derive(Default)]
pub struct Memory {
    /// Generations that failed in a way only a spec change fixes, and when. The status says so
    /// too (and survives a restart), but the watch may not have delivered that status yet when
    /// the next reconcile runs.
    held: PerObject<(i64, Instant)>,
    /// Operations of ours that run: the object's intent (`controller::intent`) when the write
    /// went out, or when it was sent away from ARM's line, and when to look again. A wake-up
    /// before then that changes no intent (our own finalizer, a dependency's readiness announced
    /// again) waits for that time instead of costing a GET.
    polling: PerObject<(u64, Instant)>,
    /// The creation records (`strata.dev/created`) this process wrote: (the CR's UID, the ARM
    /// ID). A reconcile can start from a copy of the CR older than that write (the watch had not
    /// delivered it yet), and must not then take our own new resource for a foreign one.
    created: PerObject<(String, String)>,
    /// Drift that survived our own PUT, per generation and path, and how often: the guard
    /// against a PUT loop when Azure normalises a value in a way the comparison does not know.
    repeats: PerObject<(i64, String, u32)>,
    /// The `Ready` decision last reported (the watch wakes an object whose status contradicts
    /// it).
    pub reported: Reported,
}

/// The same drift found this many times after our own PUTs, for one generation: held.
const REPEATS_BEFORE_HOLD: u32 = 3;

impl Memory {
    /// `generation` of `key` failed in a way only a spec change fixes.
    pub(super) fn hold(&self, key: &str, generation: i64) {
        self.held.set(key, (generation, Instant::now()));
    }

    /// Whether `generation` of `key` was held less than `for_at_most` ago.
    pub(super) fn is_held(&self, key: &str, generation: i64, for_at_most: Duration) -> bool {
        self.held.read(key, |held| {
            held.is_some_and(|(g, at)| *g == generation && at.elapsed() < for_at_most)
        })
    }

    /// An operation of ours runs on `key` (or it waits its turn in ARM's line): the next look
    /// is due in `after`, unless the intent changes.
    pub(super) fn poll(&self, key: &str, intent: u64, after: Duration) {
        self.polling.set(key, (intent, Instant::now() + after));
    }

    /// Nothing of ours runs on `key` any more.
    pub(super) fn stop_polling(&self, key: &str) {
        self.polling.remove(key);
    }

    /// How long until the running operation on `key` is due for a look, if one runs and the
    /// intent is the one it was started with.
    pub(super) fn poll_not_due(&self, key: &str, intent: u64) -> Option<Duration> {
        self.polling.read(key, |p| {
            p.filter(|(i, _)| *i == intent)
                .map(|(_, due)| due.saturating_duration_since(Instant::now()))
                .filter(|left| !left.is_zero())
        })
    }

    /// Whether `key` waits (for an operation or its turn) with the intent it was sent away with.
    pub(super) fn waits_with(&self, key: &str, intent: u64) -> bool {
        self.polling
            .read(key, |p| p.is_some_and(|(i, _)| *i == intent))
    }

    /// This process wrote `key`'s creation record: the CR `uid` creates `id`.
    pub(super) fn record_creation(&self, key: &str, uid: String, id: String) {
        self.created.set(key, (uid, id));
    }

    /// Reads the creation record this process wrote for `key`, if any.
    pub(super) fn creation<R>(
        &self,
        key: &str,
        f: impl FnOnce(Option<&(String, String)>) -> R,
    ) -> R {
        self.created.read(key, f)
    }

    /// The CR's finalizer is gone: its creation record goes with it.
    pub(super) fn forget_creation(&self, key: &str) {
        self.created.remove(key);
    }

    /// The drift at `path` was found again for `generation` after our own PUT: whether it has
    /// now survived more than [`REPEATS_BEFORE_HOLD`] of them (and the CR should be held).
    pub(super) fn repeated_drift(&self, key: &str, generation: i64, path: &str) -> bool {
        self.repeats.update(key, |entry| {
            if entry.0 != generation || entry.1 != path {
                *entry = (generation, path.to_owned(), 0);
            }
            entry.2 += 1;
            entry.2 > REPEATS_BEFORE_HOLD
        })
    }

    /// Azure changed on purpose (the kind's action ran): a drift found after it is new.
    pub(super) fn forget_drift(&self, key: &str) {
        self.repeats.remove(key);
    }

    /// The object is gone: everything remembered of it goes too.
    pub fn forget(&self, key: &str) {
        self.held.remove(key);
        self.polling.remove(key);
        self.created.remove(key);
        self.repeats.remove(key);
        self.reported.forget(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_drift_is_held_after_surviving_three_puts_of_one_generation() {
        let m = Memory::default();
        let found = |g, path| m.repeated_drift("ns/Subnet/a", g, path);
        assert_eq!([found(1, "a"), found(1, "a"), found(1, "a")], [false; 3]);
        assert!(found(1, "a"), "the fourth time");
        assert!(!found(2, "a"), "a new generation starts again");
        assert!(!found(2, "b"), "so does another path");
        m.forget_drift("ns/Subnet/a");
        assert!(!found(2, "b"));
    }

    #[test]
    fn forgetting_an_object_forgets_every_memory_of_it() {
        let m = Memory::default();
        let key = "ns/Subnet/a";
        m.hold(key, 1);
        m.poll(key, 7, Duration::from_secs(60));
        m.record_creation(key, "uid".into(), "/id".into());
        m.repeated_drift(key, 1, "a");
        m.forget(key);
        assert!(!m.is_held(key, 1, Duration::from_secs(60)));
        assert!(!m.waits_with(key, 7));
        assert!(m.creation(key, |c| c.is_none()));
        assert!(!m.repeated_drift(key, 1, "a"), "counting starts again");
    }
}
