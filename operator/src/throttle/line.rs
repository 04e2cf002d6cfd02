//! The line of one bucket: the requests that found it empty, each at the position it first
//! asked for. Writes and deletes of a later stage of the dependency order go first: a virtual
//! machine whose network is Ready goes before the resource group of a cluster not started yet,
//! so that clusters are finished one after another rather than all advanced together and all
//! finished last (see docs/operator.md, "Waiting for a token"). Within a stage (and for reads)
//! the namespaces take turns — a namespace's requests one turn apart, a namespace new to the
//! line starting from the turn being served — and first come within a turn: one tenant that
//! fills the line is not served before another's request that came later, and one tenant
//! alone is served first come first served. A request near its turn waits in its reconcile; a
//! write or delete further back is *sent away* and its CR called back when its turn comes.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use super::{Class, Refused, Requester, Wake};

/// A write or delete that needs at most this many tokens to come (its own included: about a
/// second of ARM's write rate) waits for them in its reconcile; one further back is
/// [`Refused::Queued`] and comes back when its turn nears. A kind has a few reconcile workers:
/// if they all waited for write tokens, that kind's CRs whose dependency just became Ready —
/// or that need no write at all (a deletion, a pause) — could not even start.
pub(super) const WAIT_IN_PLACE: f64 = 10.0;

/// Counting the requests ahead stops here: a request further back comes back after this many
/// tokens' time and counts again (bounds the work of each count).
const COUNT_UP_TO: usize = 4096;

/// A CR sent away is called back when the tokens still to come for it, its own included, are at
/// most this many: its token is there or refills next — the moment its timed return aims for.
/// Called back as soon as it could wait in place ([`WAIT_IN_PLACE`]), a resource group at the
/// back of the line was sent away again after its GET whenever a few writes of later stages
/// came meanwhile: 2.8 more GETs per resource group at 1,000 clusters, which delayed the
/// machines' reads (wake-up gap p95 1.3 s against 0.1 s).
const CALL_BACK_AT: f64 = 1.0;

/// A CR that keeps coming back to find its turn far is told to come back at most 2^this times
/// later than its tokens' refill time (it is called back sooner when its turn comes).
const FAR_AT_MOST: u32 = 3;

/// Where a request stands in a line: by rank, then by its tenant's turn, then by arrival.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Position {
    /// 0 first: a write or delete of a later stage ranks first; reads, and requests of no CR,
    /// share the last rank. Strict precedence: while the bucket stays empty, an earlier stage
    /// waits as long as writes of later stages keep coming — work already started (CRs whose
    /// dependencies were written), which it finishes first.
    rank: u8,
    /// Its tenant's turn ([`Line::arrive`]): fair queuing between namespaces.
    turn: u64,
    /// The order of asking, over every line.
    arrival: u64,
}

/// A place in a line.
#[derive(Debug)]
pub(super) enum Place {
    /// Waits in its reconcile; woken when the one ahead leaves.
    Waiting(Arc<Notify>),
    /// Not waiting here: sent away ([`Refused::Queued`]), or its CR GETs before its write.
    Away(Away),
}

/// A place whose request does not wait in line.
#[derive(Debug)]
pub(super) struct Away {
    requester: u64,
    /// Forgotten if not back by then (its CR may be gone, or need nothing any more).
    until: Instant,
    /// Calls the CR back when its turn comes; taken when called.
    wake: Option<Wake>,
    /// How many times in a row the CR came back to find its turn still far (overtaken by
    /// writes of later stages): each time it is told to come back later, and called back
    /// meanwhile when its turn comes — a resource group behind a whole fleet's network
    /// otherwise came back every few seconds for half an hour.
    far: u32,
}

/// One bucket's line.
#[derive(Debug)]
pub(super) struct Line {
    /// In the order they are served.
    pub(super) places: BTreeMap<Position, Place>,
    /// Where each requester sent away stands.
    pub(super) away: HashMap<u64, Position>,
    /// When `places` was last swept of those sent away that did not come back.
    swept: Instant,
    /// The turn each tenant's last request got (tenants whose last turn is served already are
    /// forgotten at the sweep: they start from `served` again anyway).
    turns: HashMap<u64, u64>,
    /// The latest turn served (a request took its token).
    served: u64,
}

impl Line {
    pub(super) fn new(now: Instant) -> Line {
        Line {
            places: BTreeMap::new(),
            away: HashMap::new(),
            swept: now,
            turns: HashMap::new(),
            served: 0,
        }
    }

    /// The position of a request of `class` by `requester`, the `arrival`-th to ask anywhere:
    /// its rank, and the next turn of its tenant — one after the tenant's last, and no earlier
    /// than the one after the turn being served (start-time fair queuing, every namespace
    /// weighing the same). Requests of no CR are one tenant of their own.
    pub(super) fn arrive(
        &mut self,
        class: Class,
        requester: Option<&Requester>,
        arrival: u64,
    ) -> Position {
        let rank = match (class, requester) {
            (Class::Write | Class::Delete, Some(r)) => u8::MAX - 1 - r.stage.min(u8::MAX - 1),
            _ => u8::MAX,
        };
        let tenant = requester.map_or(0, |r| r.tenant);
        let last = self.turns.get(&tenant).copied().unwrap_or(0);
        let turn = last.max(self.served) + 1;
        self.turns.insert(tenant, turn);
        Position {
            rank,
            turn,
            arrival,
        }
    }

    /// The request at `at` took its token: its turn is being served.
    pub(super) fn served(&mut self, at: Position) {
        self.served = self.served.max(at.turn);
    }

    /// Forgets those sent away that are not back in time (at most once a second).
    fn sweep(&mut self, now: Instant) {
        if now.saturating_duration_since(self.swept) < Duration::from_secs(1) {
            return;
        }
        self.swept = now;
        let served = self.served;
        self.turns.retain(|_, turn| *turn > served);
        let away = &mut self.away;
        self.places.retain(|_, place| match place {
            Place::Away(a) if a.until < now => {
                away.remove(&a.requester);
                false
            }
            _ => true,
        });
    }

    /// Calls back the CRs sent away whose turn has come ([`CALL_BACK_AT`]) with `tokens` left,
    /// each once. Asked whenever the bucket is looked at (and not held): tokens refill with
    /// time, so a turn comes without any event of its own.
    pub(super) fn call_back(&mut self, tokens: f64) {
        for (ahead, place) in self.places.values_mut().enumerate() {
            if ahead as f64 + 1.0 - tokens > CALL_BACK_AT {
                break;
            }
            if let Place::Away(Away { wake, .. }) = place
                && let Some(wake) = wake.take()
            {
                (wake.0)();
            }
        }
    }

    /// Where the request at `at` stands with `tokens` left: how many tokens must still come
    /// before it may take one — its own included; zero or less: there are enough for everyone
    /// ahead of it and itself, whether those wait here or were sent away — and how many
    /// requests are ahead.
    pub(super) fn standing(&mut self, at: Position, tokens: f64, now: Instant) -> (f64, usize) {
        self.sweep(now);
        let ahead = self.places.range(..at).take(COUNT_UP_TO).count();
        (ahead as f64 + 1.0 - tokens, ahead)
    }

    /// Sends the request at `at` away, keeping its place: it comes back when its turn comes
    /// (called back by its `wake`) or after the duration returned — the time the tokens still
    /// to come (`needed`, its own included) take to refill at `rate`, doubled for each time in a
    /// row it came back to find its turn still far (`far`, up to [`FAR_AT_MOST`]).
    pub(super) fn send_away(
        &mut self,
        at: Position,
        requester: &Requester,
        far: u32,
        needed: f64,
        rate: f64,
        now: Instant,
    ) -> Duration {
        let far = far.min(FAR_AT_MOST);
        let after = Duration::from_secs_f64(needed.max(0.0) / rate * f64::from(1u32 << far));
        self.keep(
            at,
            Away {
                requester: requester.id,
                until: now + after * 2 + Duration::from_secs(10),
                wake: requester.wake.clone(),
                far,
            },
        );
        after
    }

    /// A write or delete of `requester` at `at` whose turn is further than waiting in place
    /// allows ([`WAIT_IN_PLACE`]) is sent away, its place kept: [`Refused::Queued`]. `None`
    /// (a read, or no CR) is never sent away.
    pub(super) fn away_if_far(
        &mut self,
        at: Position,
        requester: Option<&Requester>,
        (needed, ahead): (f64, usize),
        rate: f64,
        now: Instant,
    ) -> Result<(), Refused> {
        match requester.filter(|_| needed > WAIT_IN_PLACE) {
            Some(r) => Err(Refused::Queued {
                after: self.send_away(at, r, 0, needed, rate, now),
                ahead,
            }),
            None => Ok(()),
        }
    }

    /// How many times in a row the CR away at `at` found its turn far (`None`: it is not away).
    pub(super) fn times_far(&self, at: Position) -> Option<u32> {
        match self.places.get(&at) {
            Some(Place::Away(a)) => Some(a.far),
            _ => None,
        }
    }

    fn keep(&mut self, at: Position, away: Away) {
        self.away.insert(away.requester, at);
        self.places.insert(at, Place::Away(away));
    }

    /// Keeps `at` for `requester` until `until`, not called back (it is in a reconcile, or
    /// comes back when ARM's hold ends).
    pub(super) fn keep_until(&mut self, at: Position, requester: u64, until: Instant) {
        self.keep(
            at,
            Away {
                requester,
                until,
                wake: None,
                far: 0,
            },
        );
    }

    /// The request at `at` waits here, woken through `notify`.
    pub(super) fn wait_at(&mut self, at: Position, notify: Arc<Notify>) {
        self.places.insert(at, Place::Waiting(notify));
    }

    /// The request at `at` leaves (served, or its reconcile dropped): the new first may go.
    pub(super) fn leave(&mut self, at: Position) {
        self.places.remove(&at);
        self.wake_first();
    }

    /// `requester`'s place, taken out of the line (it is back, to wait or be served).
    pub(super) fn take(&mut self, requester: u64) -> Option<Position> {
        let at = self.away.remove(&requester)?;
        self.places.remove(&at);
        Some(at)
    }

    /// Those sent away keep their places through ARM's hold, until `until`.
    pub(super) fn keep_through(&mut self, until: Instant) {
        for place in self.places.values_mut() {
            if let Place::Away(a) = place {
                a.until = a.until.max(until + Duration::from_secs(10));
            }
        }
    }

    /// Wakes the first request waiting in place: its turn may have come.
    fn wake_first(&self) {
        if let Some(Place::Waiting(first)) = self
            .places
            .values()
            .find(|p| matches!(p, Place::Waiting(_)))
        {
            first.notify_one();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(tenant: u64, stage: u8) -> Requester {
        Requester {
            tenant,
            ..Requester::new(tenant * 100, stage)
        }
    }

    #[test]
    fn namespaces_take_turns_and_one_namespace_alone_is_first_come() {
        let mut line = Line::new(Instant::now());
        let mut arrival = 0..;
        let mut arrive = |line: &mut Line, r: &Requester| {
            line.arrive(Class::Write, Some(r), arrival.next().unwrap_or_default())
        };
        // Namespace a fills the line with five writes; b's one write comes after them all.
        let a: Vec<Position> = (0..5).map(|_| arrive(&mut line, &of(1, 0))).collect();
        let b = arrive(&mut line, &of(2, 0));
        assert!(a.windows(2).all(|w| w[0] < w[1]), "a's own: first come");
        assert!(
            a[0] < b && b < a[1],
            "b's first goes after a's first, not its fifth"
        );
        // Three of a's are served: a namespace new to the line takes the next turn, beside a's
        // next request (which came first) and before the rest of a's.
        line.served(a[2]);
        let c = arrive(&mut line, &of(3, 0));
        assert!(a[3] < c && c < a[4], "{c:?}");
        // A later stage still goes first, whoever asks.
        let late = arrive(&mut line, &of(1, 12));
        assert!(late < a[0]);
        // Reads take turns too; requests of no CR are a tenant of their own.
        let read_a = line.arrive(Class::Read, Some(&of(1, 0)), 100);
        let nobody = line.arrive(Class::Read, None, 101);
        assert!(
            nobody < read_a,
            "{nobody:?} {read_a:?}: tenant 0 had no turn yet"
        );
    }
}
