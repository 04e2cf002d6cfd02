//! The line of one bucket: the requests that found it empty, each at the place it first asked
//! for. Namespaces take turns (round robin: the one served last goes to the back), so that one
//! tenant that fills a subscription's line — a thousand machines' writes — holds another's
//! resource group behind one of its writes, not all; a namespace new to the line takes its turn
//! after those already in it. Among one namespace's own requests, writes and deletes of a later
//! stage of the dependency order go first: a virtual machine whose network is Ready goes before
//! the resource group of a cluster not started yet, so that a namespace's clusters are finished
//! one after another rather than all advanced together and all finished last (see
//! docs/operator.md, "Waiting for a token"); then first come. A request near its turn waits in
//! its reconcile; a write or delete further back is *sent away* and its CR called back when its
//! turn comes.

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

/// Where a request stands in a line: its tenant's queue, and in it by rank, then by arrival.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Position {
    /// Its namespace (a hash); requests of no CR are a tenant of their own.
    tenant: u64,
    /// Its place among its tenant's requests.
    key: Key,
}

/// Two requests of one tenant are ordered by their keys; of two tenants, by the turns the
/// tenants take, which change as they are served (so not by the positions alone).
impl PartialOrd for Position {
    fn partial_cmp(&self, other: &Position) -> Option<std::cmp::Ordering> {
        (self.tenant == other.tenant).then(|| self.key.cmp(&other.key))
    }
}

/// The order of one tenant's requests: by rank, then by the order of asking.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Key {
    /// 0 first: a write or delete of a later stage ranks first; reads, and requests of no CR,
    /// share the last rank. Strict precedence within the tenant: while the bucket stays empty,
    /// its earlier stage waits as long as its writes of later stages keep coming — work already
    /// started (CRs whose dependencies were written), which it finishes first.
    rank: u8,
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

/// One bucket's line: a queue per tenant, served in turns.
#[derive(Debug)]
pub(super) struct Line {
    /// The tenants' queues in the order they take turns (the key: when each was last served or
    /// joined). A queue that empties keeps its turn until the next sweep, so that a request
    /// taken out to be looked at again does not lose its tenant's turn.
    queues: BTreeMap<u64, BTreeMap<Key, Place>>,
    /// Each tenant's key in `queues`.
    turn_of: HashMap<u64, u64>,
    /// The next key in `queues`: the back of the turns.
    next_turn: u64,
    /// Where each requester sent away stands.
    pub(super) away: HashMap<u64, Position>,
    /// When the line was last swept of those sent away that did not come back.
    swept: Instant,
}

/// The items of `iters` taking turns: the first of each, then the second of each, …
fn in_turns<I: Iterator>(mut iters: Vec<I>) -> impl Iterator<Item = I::Item> {
    let mut next = 0;
    std::iter::from_fn(move || {
        while !iters.is_empty() {
            if next >= iters.len() {
                next = 0;
            }
            match iters[next].next() {
                Some(item) => {
                    next += 1;
                    return Some(item);
                }
                None => {
                    iters.remove(next);
                }
            }
        }
        None
    })
}

impl Line {
    pub(super) fn new(now: Instant) -> Line {
        Line {
            queues: BTreeMap::new(),
            turn_of: HashMap::new(),
            next_turn: 0,
            away: HashMap::new(),
            swept: now,
        }
    }

    /// The position of a request of `class` by `requester`, the `arrival`-th to ask anywhere.
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
        Position {
            tenant: requester.map_or(0, |r| r.tenant),
            key: Key { rank, arrival },
        }
    }

    /// The request at `at` took its token: its tenant goes to the back of the turns.
    pub(super) fn served(&mut self, at: Position) {
        if let Some(turn) = self.turn_of.get_mut(&at.tenant)
            && let Some(queue) = self.queues.remove(turn)
        {
            *turn = self.next_turn;
            self.queues.insert(self.next_turn, queue);
            self.next_turn += 1;
        }
    }

    /// Every place, in the order they are served.
    pub(super) fn places(&self) -> impl Iterator<Item = &Place> {
        in_turns(self.queues.values().map(|q| q.values()).collect())
    }

    fn places_mut(&mut self) -> impl Iterator<Item = &mut Place> {
        in_turns(self.queues.values_mut().map(|q| q.values_mut()).collect())
    }

    /// The queue of `tenant`, made at the back of the turns if it has none.
    fn queue(&mut self, tenant: u64) -> &mut BTreeMap<Key, Place> {
        let turn = *self.turn_of.entry(tenant).or_insert_with(|| {
            self.next_turn += 1;
            self.next_turn - 1
        });
        self.queues.entry(turn).or_default()
    }

    fn queue_of(&self, tenant: u64) -> Option<&BTreeMap<Key, Place>> {
        self.queues.get(self.turn_of.get(&tenant)?)
    }

    fn remove(&mut self, at: Position) -> Option<Place> {
        let turn = self.turn_of.get(&at.tenant)?;
        self.queues.get_mut(turn)?.remove(&at.key)
    }

    /// Forgets those sent away that are not back in time, and the turns of tenants with nothing
    /// in line (at most once a second).
    fn sweep(&mut self, now: Instant) {
        if now.saturating_duration_since(self.swept) < Duration::from_secs(1) {
            return;
        }
        self.swept = now;
        let away = &mut self.away;
        for queue in self.queues.values_mut() {
            queue.retain(|_, place| match place {
                Place::Away(a) if a.until < now => {
                    away.remove(&a.requester);
                    false
                }
                _ => true,
            });
        }
        self.queues.retain(|_, queue| !queue.is_empty());
        let queues = &self.queues;
        self.turn_of.retain(|_, turn| queues.contains_key(turn));
    }

    /// Calls back the CRs sent away whose turn has come ([`CALL_BACK_AT`]) with `tokens` left,
    /// each once. Asked whenever the bucket is looked at (and not held): tokens refill with
    /// time, so a turn comes without any event of its own.
    pub(super) fn call_back(&mut self, tokens: f64) {
        for (ahead, place) in self.places_mut().enumerate() {
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
    /// requests are ahead: those of its own tenant before it, and as many of each other
    /// tenant's (one more of those whose turn comes before its tenant's).
    pub(super) fn standing(&mut self, at: Position, tokens: f64, now: Instant) -> (f64, usize) {
        self.sweep(now);
        let own = self
            .queue_of(at.tenant)
            .map_or(0, |q| q.range(..at.key).take(COUNT_UP_TO).count());
        // A tenant not in line yet would join at the back.
        let turn = self.turn_of.get(&at.tenant).copied().unwrap_or(u64::MAX);
        let others: usize = self
            .queues
            .iter()
            .filter(|(t, _)| **t != turn)
            .map(|(t, q)| q.len().min(own + usize::from(*t < turn)))
            .sum();
        let ahead = (own + others).min(COUNT_UP_TO);
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
        match self.queue_of(at.tenant)?.get(&at.key) {
            Some(Place::Away(a)) => Some(a.far),
            _ => None,
        }
    }

    fn keep(&mut self, at: Position, away: Away) {
        self.away.insert(away.requester, at);
        self.queue(at.tenant).insert(at.key, Place::Away(away));
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
        self.queue(at.tenant).insert(at.key, Place::Waiting(notify));
    }

    /// The request at `at` leaves (served, or its reconcile dropped): the new first may go.
    pub(super) fn leave(&mut self, at: Position) {
        self.remove(at);
        self.wake_first();
    }

    /// `requester`'s place, taken out of the line (it is back, to wait or be served).
    pub(super) fn take(&mut self, requester: u64) -> Option<Position> {
        let at = self.away.remove(&requester)?;
        self.remove(at);
        Some(at)
    }

    /// Those sent away keep their places through ARM's hold, until `until`.
    pub(super) fn keep_through(&mut self, until: Instant) {
        for place in self.places_mut() {
            if let Place::Away(a) = place {
                a.until = a.until.max(until + Duration::from_secs(10));
            }
        }
    }

    /// Wakes the first request waiting in place: its turn may have come.
    fn wake_first(&self) {
        if let Some(Place::Waiting(first)) = self.places().find(|p| matches!(p, Place::Waiting(_)))
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
    fn namespaces_take_turns_and_within_one_later_stages_go_first() {
        let now = Instant::now();
        let mut line = Line::new(now);
        let mut arrival = 0..;
        let mut wait = |line: &mut Line, tenant, stage| {
            let at = line.arrive(
                Class::Write,
                Some(&of(tenant, stage)),
                arrival.next().unwrap_or_default(),
            );
            line.wait_at(at, Arc::new(Notify::new()));
            at
        };
        let ahead = |line: &mut Line, at| line.standing(at, 0.0, now).1;
        // Namespace a fills the line with five machines' writes (a late stage); b's resource
        // group (the first stage) comes after them all, and goes after a's first, not its fifth.
        let a: Vec<Position> = (0..5).map(|_| wait(&mut line, 1, 12)).collect();
        let b = wait(&mut line, 2, 0);
        assert_eq!(ahead(&mut line, b), 1);
        let order: Vec<usize> = a.iter().map(|&at| ahead(&mut line, at)).collect();
        assert_eq!(order, [0, 2, 3, 4, 5], "a's own first come, b's between");
        // Among a's own, a later stage goes first; an earlier one after all of a's.
        let a_later = wait(&mut line, 1, 13);
        let a_earlier = wait(&mut line, 1, 0);
        assert_eq!(ahead(&mut line, a_later), 0);
        assert_eq!(ahead(&mut line, a_earlier), 7, "behind a's six and b's one");
        // Served, a goes to the back of the turns: b's next goes before a's next.
        line.served(a_later);
        line.leave(a_later);
        assert_eq!((ahead(&mut line, b), ahead(&mut line, a[0])), (0, 1));
        // A namespace new to the line takes its turn after those in it.
        let c = line.arrive(Class::Write, Some(&of(3, 0)), 100);
        assert_eq!(ahead(&mut line, c), 2);
        // Reads take turns too; requests of no CR are a tenant of their own.
        let read_a = line.arrive(Class::Read, Some(&of(1, 0)), 101);
        let nobody = line.arrive(Class::Read, None, 102);
        assert_eq!(
            (ahead(&mut line, read_a), ahead(&mut line, nobody)),
            (7, 2),
            "a's read is behind a's writes; nobody's first is in the first round"
        );
    }

    #[test]
    fn a_namespace_keeps_its_turn_while_its_place_is_looked_at_again() {
        let now = Instant::now();
        let mut line = Line::new(now);
        let a = line.arrive(Class::Write, Some(&of(1, 0)), 0);
        line.wait_at(a, Arc::new(Notify::new()));
        let b = line.arrive(Class::Write, Some(&of(2, 0)), 1);
        line.keep_until(b, 200, now + Duration::from_secs(30));
        // b's place is taken out (its CR is back) and is alone in b's queue: b keeps its turn
        // after a's rather than go behind a namespace that joined meanwhile.
        assert_eq!(line.take(200), Some(b));
        let c = line.arrive(Class::Write, Some(&of(3, 0)), 2);
        line.wait_at(c, Arc::new(Notify::new()));
        assert_eq!(line.standing(b, 0.0, now).1, 1);
        assert_eq!(line.standing(c, 0.0, now).1, 1, "b is not in line now");
        // The sweep forgets the turn of a namespace with nothing in line.
        line.sweep(now + Duration::from_secs(2));
        assert_eq!(line.standing(b, 0.0, now).1, 2);
    }
}
