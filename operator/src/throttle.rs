//! ARM-rate-aware token buckets, one per subscription and request class, shared by every
//! reconcile, mirroring ARM's own limits (reads 250 burst / 25 per s, writes and deletes 200 / 10
//! per s by default). Under load the operator runs at ARM's rate instead of collecting 429s.
//! ARM's own answers correct them: a 429's `Retry-After` holds a bucket, and the
//! `x-ms-ratelimit-remaining-subscription-…` headers lower it when ARM counts fewer tokens.
//!
//! Requests that find a bucket empty stand in its *line*, each at the *place* it first asked
//! for. Reads are served first come first served. Writes and deletes are served by their kind's
//! *stage* first — a kind later in the dependency order before an earlier one — and first come
//! within a stage: a virtual machine whose network is Ready goes before the resource group of a
//! cluster not started yet, so that clusters are finished one after another rather than all
//! advanced together and all finished last (see docs/operator.md, "Waiting for a token").
//! A read, or a write or delete with few tokens to wait for, waits in its reconcile. A write or
//! delete further back — or overtaken while it waited — is *sent away* ([`Refused::Queued`]):
//! its CR is called back when its turn comes ([`Wake`]; requeued for the time its tokens take
//! to refill, should no call come) and finds its place again ([`REQUESTER`]). A
//! place keeps its token from those behind it whether its request waits or was sent away; a
//! place whose CR no longer needs it is given up ([`Throttle::leave`]), or forgotten when its
//! CR does not come back in time.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use prometheus_client::metrics::counter::Counter;
use tokio::sync::Notify;

/// Which of ARM's buckets a request draws from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Class {
    Read,
    Write,
    Delete,
}

/// A bucket's size and refill rate.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Bucket {
    pub burst: u32,
    pub per_second: f64,
}

/// The limits per subscription.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Limits {
    pub reads: Bucket,
    pub writes: Bucket,
    pub deletes: Bucket,
}

impl Default for Limits {
    /// ARM's documented per-subscription limits.
    fn default() -> Self {
        Limits {
            reads: Bucket {
                burst: 250,
                per_second: 25.0,
            },
            writes: Bucket {
                burst: 200,
                per_second: 10.0,
            },
            deletes: Bucket {
                burst: 200,
                per_second: 10.0,
            },
        }
    }
}

impl Limits {
    /// The same limits on a clock that runs `1 / time_scale` times faster (the emulator's
    /// `--time-scale`): refill rates scale, bursts do not.
    pub fn scaled(self, time_scale: f64) -> Limits {
        let f = |b: Bucket| Bucket {
            burst: b.burst,
            per_second: b.per_second / time_scale,
        };
        Limits {
            reads: f(self.reads),
            writes: f(self.writes),
            deletes: f(self.deletes),
        }
    }
}

tokio::task_local! {
    /// Who makes the requests, set once per reconcile (`reconcile::reconcile`), so that a
    /// request it was sent away with keeps its place in the line when the CR comes back
    /// ([`Refused::Queued`]) without each ARM call passing it along.
    pub static REQUESTER: Requester;
}

/// The CR whose reconcile makes a request.
#[derive(Clone, Debug)]
pub struct Requester {
    /// A hash of the CR's kind, namespace and name.
    pub id: u64,
    /// Its kind's position in the dependency order (`CloudKind::stage`): in a write or delete
    /// line, a later stage goes first.
    pub stage: u8,
    /// Calls the CR back when it was sent away and its turn comes (`None`: it comes back only
    /// when it was told to).
    pub wake: Option<Wake>,
}

impl Requester {
    /// A requester that is not called back: it comes back when [`Refused::Queued`] said.
    pub fn new(id: u64, stage: u8) -> Requester {
        Requester {
            id,
            stage,
            wake: None,
        }
    }
}

/// Calls a CR sent away from a line back to it (the operator's: a trigger of the CR's
/// controller) once its turn comes: the line moves by the tokens that refill, the places given
/// up and the writes of later stages that go ahead, which the CR cannot foresee when it is sent
/// away.
#[derive(Clone)]
pub struct Wake(Arc<dyn Fn() + Send + Sync>);

impl Wake {
    pub fn new(call: impl Fn() + Send + Sync + 'static) -> Wake {
        Wake(Arc::new(call))
    }
}

impl std::fmt::Debug for Wake {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Wake")
    }
}

/// Where a CR that holds a place in a line stands, when it comes back to it
/// ([`Throttle::turn`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Turn {
    /// It holds no place (or the throttle is off).
    NotInLine,
    /// Its turn is near: its reconcile goes on to its request.
    Near,
    /// Its turn is still far, or ARM's `Retry-After` holds the bucket: back after this, its
    /// place kept — or sooner, called back when its turn comes.
    Far(Duration),
}

/// The shared buckets.
pub struct Throttle {
    limits: Limits,
    /// Off: every request goes out at once and ARM's own answers (429s) are the only limit —
    /// for a pacing that models an operator without client-side buckets.
    enabled: bool,
    /// By bucket key and class. The key is what ARM keys its buckets by: the subscription and
    /// the principal (`<subscription>/<tenant>/<client ID>`, `ArmClient::bucket`); the
    /// functions below call it `subscription` for short.
    buckets: Mutex<HashMap<(String, Class), State>>,
    waits: Counter,
    /// Numbers the places in every line, in the order the requests first asked (the low bits of
    /// a place: [`Throttle::new_place`]).
    next_place: std::sync::atomic::AtomicU64,
}

/// One subscription's bucket of one class.
#[derive(Debug)]
struct State {
    /// Tokens left (below zero after ARM's count lowered it).
    tokens: f64,
    /// When `tokens` was last brought up to date.
    at: Instant,
    /// ARM refused this bucket with a `Retry-After`: nothing is sent before then.
    held_until: Option<Instant>,
    /// The line of requests that found no token, in the order they are served
    /// ([`Throttle::new_place`]): each waits in its reconcile, or was sent away and is expected
    /// back.
    line: BTreeMap<u64, Place>,
    /// Where each requester sent away stands in `line`.
    away: HashMap<u64, u64>,
    /// When `line` was last swept of those sent away that did not come back.
    swept: Instant,
}

/// A place in a bucket's line.
#[derive(Debug)]
enum Place {
    /// Waits in its reconcile; woken when the one ahead leaves.
    Waiting(Arc<Notify>),
    /// Not waiting here: sent away ([`Refused::Queued`]), or its CR GETs before its write.
    Away(Away),
}

/// A place whose request does not wait in line.
#[derive(Debug)]
struct Away {
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

/// Why a request got no token; the caller requeues instead of waiting, so that a worker is not
/// parked for the whole wait.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refused {
    /// ARM's `Retry-After` holds the bucket for this long.
    Held(Duration),
    /// A write or delete further back in the line than waiting in place allows
    /// ([`WAIT_IN_PLACE`]): its turn comes in about `after`, with `ahead` before it (counted up
    /// to [`COUNT_UP_TO`]).
    Queued { after: Duration, ahead: usize },
}

/// The share of ARM's limits the operator allows itself: requests leave our bucket a little
/// before they reach ARM's, so running at exactly ARM's rate could still meet a 429 at the edge.
const MARGIN: f64 = 0.9;

/// A write or delete that needs at most this many tokens to come (its own included: about a
/// second of ARM's write rate) waits for them in its reconcile; one further back is
/// [`Refused::Queued`] and comes back when its turn nears. A kind has a few reconcile workers:
/// if they all waited for write tokens, that kind's CRs whose dependency just became Ready —
/// or that need no write at all (a deletion, a pause) — could not even start.
const WAIT_IN_PLACE: f64 = 10.0;

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

impl Bucket {
    fn capacity(self) -> f64 {
        (f64::from(self.burst) * MARGIN).floor().max(1.0)
    }

    fn rate(self) -> f64 {
        (self.per_second * MARGIN).max(1e-3)
    }
}

impl State {
    /// Brings `tokens` up to `now`.
    fn refill(&mut self, bucket: Bucket, now: Instant) {
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        if elapsed > 0.0 {
            self.tokens = (self.tokens + elapsed * bucket.rate()).min(bucket.capacity());
            self.at = now;
        }
    }

    /// Forgets those sent away that are not back in time (at most once a second).
    fn sweep(&mut self, now: Instant) {
        if now.saturating_duration_since(self.swept) < Duration::from_secs(1) {
            return;
        }
        self.swept = now;
        let away = &mut self.away;
        self.line.retain(|_, place| match place {
            Place::Away(a) if a.until < now => {
                away.remove(&a.requester);
                false
            }
            _ => true,
        });
    }

    /// Calls back the CRs sent away whose turn has come ([`CALL_BACK_AT`]), each once — none
    /// while ARM's `Retry-After` holds the bucket. Asked whenever the bucket is looked at:
    /// tokens refill with time, so a turn comes without any event of its own.
    fn call_back(&mut self, now: Instant) {
        if self.held_until.is_some_and(|u| u > now) {
            return;
        }
        for (ahead, place) in self.line.values_mut().enumerate() {
            if ahead as f64 + 1.0 - self.tokens > CALL_BACK_AT {
                break;
            }
            if let Place::Away(Away { wake, .. }) = place
                && let Some(wake) = wake.take()
            {
                (wake.0)();
            }
        }
    }

    /// Where the request at `place` stands: how many tokens must still come before it may take
    /// one — its own included; zero or less: there are enough for everyone ahead of it and
    /// itself, whether those wait here or were sent away — and how many requests are ahead.
    fn standing(&mut self, place: u64, now: Instant) -> (f64, usize) {
        self.sweep(now);
        let ahead = self.line.range(..place).take(COUNT_UP_TO).count();
        (ahead as f64 + 1.0 - self.tokens, ahead)
    }

    /// Sends the request at `place` away, keeping its place: it comes back when its turn comes
    /// (called back by its `wake`) or after the duration returned — the time the tokens still
    /// to come (`needed`, its own included) take to refill, doubled for each time in a row it
    /// came back to find its turn still far (`far`, up to [`FAR_AT_MOST`]).
    fn send_away(
        &mut self,
        place: u64,
        requester: &Requester,
        far: u32,
        needed: f64,
        rate: f64,
        now: Instant,
    ) -> Duration {
        let far = far.min(FAR_AT_MOST);
        let after = Duration::from_secs_f64(needed.max(0.0) / rate * f64::from(1u32 << far));
        self.keep(
            place,
            Away {
                requester: requester.id,
                until: now + after * 2 + Duration::from_secs(10),
                wake: requester.wake.clone(),
                far,
            },
        );
        after
    }

    /// A write or delete of `requester` at `place` whose turn is further than waiting in place
    /// allows ([`WAIT_IN_PLACE`]) is sent away, its place kept: [`Refused::Queued`]. `None`
    /// (a read, or no CR) is never sent away.
    fn away_if_far(
        &mut self,
        place: u64,
        requester: Option<&Requester>,
        (needed, ahead): (f64, usize),
        rate: f64,
        now: Instant,
    ) -> Result<(), Refused> {
        match requester.filter(|_| needed > WAIT_IN_PLACE) {
            Some(r) => Err(Refused::Queued {
                after: self.send_away(place, r, 0, needed, rate, now),
                ahead,
            }),
            None => Ok(()),
        }
    }

    /// Keeps `place` for a requester who is not waiting here.
    fn keep(&mut self, place: u64, away: Away) {
        self.away.insert(away.requester, place);
        self.line.insert(place, Place::Away(away));
    }

    /// Keeps `place` for `requester` until `until`, not called back (it is in a reconcile, or
    /// comes back when ARM's hold ends).
    fn keep_until(&mut self, place: u64, requester: u64, until: Instant) {
        self.keep(
            place,
            Away {
                requester,
                until,
                wake: None,
                far: 0,
            },
        );
    }

    /// Wakes the first request waiting in place: its turn may have come.
    fn wake_first(&self) {
        if let Some(Place::Waiting(first)) =
            self.line.values().find(|p| matches!(p, Place::Waiting(_)))
        {
            first.notify_one();
        }
    }
}

impl Throttle {
    pub fn new(limits: Limits) -> Throttle {
        Self::with_counter(limits, Counter::default())
    }

    /// Counts waits in `waits` (the metric `strata_operator_arm_throttle_waits_total`).
    pub fn with_counter(limits: Limits, waits: Counter) -> Throttle {
        Throttle {
            limits,
            enabled: true,
            buckets: Mutex::new(HashMap::new()),
            waits,
            next_place: std::sync::atomic::AtomicU64::new(1),
        }
    }

    /// The same throttle switched off: no bucket, no hold, nothing learnt from ARM's headers.
    pub fn switched_off(mut self) -> Throttle {
        self.enabled = false;
        self
    }

    fn bucket(&self, class: Class) -> Bucket {
        match class {
            Class::Read => self.limits.reads,
            Class::Write => self.limits.writes,
            Class::Delete => self.limits.deletes,
        }
    }

    /// A new place in `class`'s line for a request of `requester`. A place orders the line: its
    /// high byte is the rank (a write or delete of a later stage ranks first; reads, and
    /// requests of no CR, share the last rank), its low bits the order of asking. Strict
    /// precedence: while the bucket stays empty, an earlier stage waits as long as writes of
    /// later stages keep coming — work already started (CRs whose dependencies were written),
    /// which it finishes first.
    fn new_place(&self, class: Class, requester: Option<&Requester>) -> u64 {
        let seq = self.next_place.fetch_add(1, Ordering::Relaxed) & ((1 << 56) - 1);
        let rank = match (class, requester) {
            (Class::Write | Class::Delete, Some(r)) => u8::MAX - 1 - r.stage.min(u8::MAX - 1),
            _ => u8::MAX,
        };
        (u64::from(rank) << 56) | seq
    }

    /// Runs `f` on the subscription's bucket for `class`, refilled up to now.
    fn with_state<T>(
        &self,
        subscription: &str,
        class: Class,
        f: impl FnOnce(&mut State, Instant) -> T,
    ) -> T {
        let bucket = self.bucket(class);
        let now = Instant::now();
        let mut buckets = self
            .buckets
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let state = buckets
            .entry((subscription.to_ascii_lowercase(), class))
            .or_insert_with(|| State {
                tokens: bucket.capacity(),
                at: now,
                held_until: None,
                line: BTreeMap::new(),
                away: HashMap::new(),
                swept: now,
            });
        state.refill(bucket, now);
        let result = f(state, now);
        state.call_back(now);
        result
    }

    /// For a CR sent away ([`Refused::Queued`]) and back — called back, or at the time it was
    /// told: whether its turn is near, or still further than waiting in place allows (or ARM's
    /// `Retry-After` holds the bucket) and how long until it looks again, its place kept that
    /// much longer. The loop asks before anything else, so that a CR back early spends nothing
    /// of ARM's read budget.
    pub fn turn(&self, requester: &Requester) -> Turn {
        if !self.enabled {
            return Turn::NotInLine;
        }
        let now = Instant::now();
        let mut buckets = self
            .buckets
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let turn = buckets.iter_mut().find_map(|((_, class), state)| {
            let place = *state.away.get(&requester.id)?;
            let bucket = self.bucket(*class);
            state.refill(bucket, now);
            if let Some(until) = state.held_until.filter(|u| *u > now) {
                state.keep_until(place, requester.id, until + Duration::from_secs(10));
                return Some(Turn::Far(until - now));
            }
            let far = match state.line.get(&place) {
                Some(Place::Away(a)) => a.far + 1,
                _ => 0,
            };
            let (needed, _) = state.standing(place, now);
            let turn = if needed > WAIT_IN_PLACE {
                Turn::Far(state.send_away(place, requester, far, needed, bucket.rate(), now))
            } else {
                Turn::Near
            };
            state.call_back(now);
            Some(turn)
        });
        turn.unwrap_or(Turn::NotInLine)
    }

    /// Before the GET that precedes a CR's write (its first, or one it was sent away with):
    /// when that write would stand far back in the line, the CR is sent away now
    /// ([`Refused::Queued`]) and GETs when its turn nears — a GET now would be stale by then,
    /// and spent twice. Nearer, its place is taken now and kept for the write (given up if the
    /// GET shows none is needed: [`Throttle::leave`]). Takes no token.
    pub fn turn_near(
        &self,
        subscription: &str,
        class: Class,
        first_write: bool,
    ) -> Result<(), Refused> {
        let Some(requester) = REQUESTER
            .try_with(Requester::clone)
            .ok()
            .filter(|_| self.enabled)
        else {
            return Ok(());
        };
        let rate = self.bucket(class).rate();
        self.with_state(subscription, class, |state, now| {
            let held = state.away.get(&requester.id).copied();
            if held.is_none() && !first_write {
                return Ok(());
            }
            if let Some(until) = state.held_until.filter(|u| *u > now) {
                return Err(Refused::Held(until - now));
            }
            let place = held.unwrap_or_else(|| self.new_place(class, Some(&requester)));
            let (needed, ahead) = state.standing(place, now);
            if needed <= 0.0 && held.is_none() {
                // A token is there for it: nothing to keep.
                return Ok(());
            }
            if held.is_none() {
                self.waits.inc();
            }
            state.away_if_far(place, Some(&requester), (needed, ahead), rate, now)?;
            state.keep_until(place, requester.id, now + Duration::from_secs(30));
            Ok(())
        })
    }

    /// The CR's reconcile ended without needing the places it holds (its GET showed no write
    /// is due, it was deleted or paused, it failed otherwise): those behind move up now rather
    /// than when the places would have been forgotten.
    pub fn leave(&self, requester: u64) {
        if !self.enabled {
            return;
        }
        let mut buckets = self
            .buckets
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for state in buckets.values_mut() {
            if let Some(place) = state.away.remove(&requester) {
                state.line.remove(&place);
                state.wake_first();
            }
        }
    }

    /// Takes a token from the subscription's bucket for this class, first come first served:
    /// at once when none is in line and a token is left; else it waits in line — unless it is a
    /// write or delete of a CR ([`REQUESTER`]) far back in the line: then [`Refused::Queued`],
    /// its place kept for the CR's return. [`Refused::Held`] while ARM's `Retry-After` holds the
    /// bucket (a place in line is kept through the hold).
    pub async fn acquire(&self, subscription: &str, class: Class) -> Result<(), Refused> {
        if !self.enabled {
            return Ok(());
        }
        let requester = REQUESTER.try_with(Requester::clone).ok();
        // Reads wait in place: they are short, and a CR sent away for one would report a
        // resource that is Ready as not Ready meanwhile.
        let may_leave = requester.as_ref().filter(|_| class != Class::Read);
        let rate = self.bucket(class).rate();
        let notify = Arc::new(Notify::new());
        let place = self.with_state(subscription, class, |state, now| {
            // Back from being sent away: the place it had.
            let kept = requester.as_ref().and_then(|r| state.away.remove(&r.id));
            let place = kept.unwrap_or_else(|| self.new_place(class, requester.as_ref()));
            state.line.remove(&place);
            if let Some(until) = state.held_until.filter(|u| *u > now) {
                if let (Some(_), Some(r)) = (kept, &requester) {
                    state.keep_until(place, r.id, until + Duration::from_secs(10));
                }
                return Err(Refused::Held(until - now));
            }
            let (needed, ahead) = state.standing(place, now);
            if needed <= 0.0 {
                state.tokens -= 1.0;
                return Ok(None);
            }
            if kept.is_none() {
                self.waits.inc();
            }
            state.away_if_far(place, may_leave, (needed, ahead), rate, now)?;
            state.line.insert(place, Place::Waiting(notify.clone()));
            Ok(Some(place))
        })?;
        let Some(place) = place else { return Ok(()) };
        let mut in_line = InLine {
            throttle: self,
            subscription,
            class,
            place,
            kept: false,
        };
        loop {
            let needed = self.with_state(subscription, class, |state, now| {
                if let Some(until) = state.held_until.filter(|u| *u > now) {
                    // Its place is kept through the hold for the CR's return.
                    if let Some(r) = &requester {
                        state.keep_until(place, r.id, until + Duration::from_secs(10));
                    }
                    return Err(Refused::Held(until - now));
                }
                let (needed, ahead) = state.standing(place, now);
                if needed <= 0.0 {
                    state.tokens -= 1.0;
                }
                // Overtaken while it waited (writes of a later stage went ahead): sent away
                // rather than hold its reconcile worker for a turn no longer near.
                state.away_if_far(place, may_leave, (needed, ahead), rate, now)?;
                Ok(needed)
            });
            let needed = match needed {
                Ok(needed) => needed,
                Err(refused) => {
                    // Its place stays in line for the CR's return.
                    in_line.kept = requester.is_some();
                    return Err(refused);
                }
            };
            if needed <= 0.0 {
                return Ok(());
            }
            // Woken when the first in line leaves (its turn may have been ours), else when the
            // tokens for everyone up to this one should be there.
            let wait = Duration::from_secs_f64(needed / rate);
            let _ = tokio::time::timeout(wait, notify.notified()).await;
        }
    }

    /// ARM refused a request of this class with `Retry-After: retry_after`: no request of the
    /// class goes to the subscription before then, whichever CR sends it, and the bucket
    /// refills only from then on.
    pub fn hold(&self, subscription: &str, class: Class, retry_after: Duration) {
        if !self.enabled {
            return;
        }
        self.with_state(subscription, class, |state, now| {
            let until = now + retry_after;
            let until = state.held_until.map_or(until, |u| u.max(until));
            state.held_until = Some(until);
            state.tokens = state.tokens.min(0.0);
            state.at = until;
            // Those sent away keep their places through the hold.
            for place in state.line.values_mut() {
                if let Place::Away(a) = place {
                    a.until = a.until.max(until + Duration::from_secs(10));
                }
            }
        });
    }

    /// How long ARM's `Retry-After` still holds the bucket back (zero: not held).
    pub fn held_for(&self, subscription: &str, class: Class) -> Duration {
        self.with_state(subscription, class, |state, now| {
            state
                .held_until
                .map_or(Duration::ZERO, |u| u.saturating_duration_since(now))
        })
    }

    /// ARM said how many requests of this class it still allows
    /// (`x-ms-ratelimit-remaining-subscription-…`): when that is fewer than our bucket holds,
    /// ARM's count wins (another client of the subscription spends the same budget).
    pub fn observe_remaining(&self, subscription: &str, class: Class, remaining: u64) {
        if !self.enabled {
            return;
        }
        self.with_state(subscription, class, |state, _| {
            // Precision: counts beyond 2^53 do not occur.
            let remaining = remaining as f64 * MARGIN;
            if remaining < state.tokens {
                tracing::debug!(
                    bucket = subscription,
                    ?class,
                    ours = state.tokens,
                    arm = remaining,
                    "ARM's remaining count is lower: the bucket follows it"
                );
                state.tokens = remaining;
            }
        });
    }

    /// Tokens left in a bucket (tests and diagnostics).
    pub fn tokens(&self, subscription: &str, class: Class) -> f64 {
        self.with_state(subscription, class, |state, _| state.tokens)
    }

    /// How many requests found no token at once so far (waited in line or were sent away; a
    /// request sent away again is not counted again).
    pub fn waits(&self) -> u64 {
        self.waits.get()
    }
}

/// A request waiting in place: leaves the line when it took its token, or its reconcile was
/// dropped — and wakes the new first in line. Its place stays when it was kept for its CR
/// through ARM's hold (`kept`).
struct InLine<'a> {
    throttle: &'a Throttle,
    subscription: &'a str,
    class: Class,
    place: u64,
    kept: bool,
}

impl Drop for InLine<'_> {
    fn drop(&mut self) {
        if self.kept {
            return;
        }
        self.throttle
            .with_state(self.subscription, self.class, |state, _| {
                state.line.remove(&self.place);
                state.wake_first();
            });
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
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
        let Err(Refused::Held(left)) = t.acquire("SUB-A", Class::Write).await else {
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
        t.acquire("sub-b", Class::Write).await.unwrap();
        t.acquire("sub-a", Class::Read).await.unwrap();
        assert_eq!(t.held_for("sub-a", Class::Read), Duration::ZERO);
    }

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
            t.acquire("s", Class::Write).await.unwrap();
        }
        assert_eq!(t.waits(), 0);
        assert_eq!(t.held_for("s", Class::Write), Duration::ZERO);
    }

    #[tokio::test]
    async fn a_hold_ends_and_the_bucket_refills_from_then_on() {
        let t = Throttle::new(Limits::default());
        t.hold("s", Class::Read, Duration::from_millis(50));
        assert!(t.acquire("s", Class::Read).await.is_err());
        tokio::time::sleep(Duration::from_millis(60)).await;
        t.acquire("s", Class::Read).await.unwrap();
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
            t.acquire("sub-a", Class::Read).await.unwrap();
        }
        assert_eq!(t.waits(), 0, "the burst needs no wait");
        t.acquire("sub-a", Class::Read).await.unwrap();
        assert_eq!(t.waits(), 1, "the tenth read waits for a refill");
        t.acquire("SUB-B", Class::Read).await.unwrap();
        t.acquire("sub-a", Class::Write).await.unwrap();
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
        t.acquire("s", Class::Write).await.unwrap();
        t
    }

    /// Requests waiting in place, and sent away.
    fn line(t: &Throttle) -> (usize, usize) {
        let buckets = t.buckets.lock().unwrap();
        let s = &buckets[&("s".to_owned(), Class::Write)];
        let waiting = s
            .line
            .values()
            .filter(|p| matches!(p, Place::Waiting(_)))
            .count();
        assert_eq!(s.line.len() - waiting, s.away.len());
        (waiting, s.away.len())
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
            waiters.push(tokio::spawn(REQUESTER.scope(cr(requester), async move {
                t2.acquire("s", Class::Write).await
            })));
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
            tasks.push(tokio::spawn(REQUESTER.scope(cr(requester), async move {
                t2.acquire("s", Class::Write).await.unwrap();
                served.lock().unwrap().push(requester);
            })));
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
            tasks.push(tokio::spawn(REQUESTER.scope(
                Requester::new(id, stage),
                async move {
                    t2.acquire("s", Class::Write).await.unwrap();
                    served.lock().unwrap().push(id);
                },
            )));
            wait_for_line(&t, n + 1).await;
        }
        for task in tasks {
            task.await.unwrap();
        }
        assert_eq!(*served.lock().unwrap(), [3, 4, 5, 1, 2]);
        // Reads stay first come whatever the stage.
        let read = |stage| t.new_place(Class::Read, Some(&Requester::new(9, stage)));
        assert!(read(12) < read(0));
        let write = |stage| t.new_place(Class::Write, Some(&Requester::new(9, stage)));
        assert!(write(0) > write(12));
        assert!(write(3) < t.new_place(Class::Write, None), "no CR: last");
    }

    #[tokio::test]
    async fn a_write_overtaken_while_it_waits_is_sent_away_with_its_place() {
        let t = spent(1.0).await;
        let t2 = t.clone();
        let first = tokio::spawn(
            REQUESTER.scope(cr(1), async move { t2.acquire("s", Class::Write).await }),
        );
        wait_for_line(&t, 1).await;
        // Eleven writes of a later stage go ahead of it: ten wait, the eleventh is sent away.
        let mut later = Vec::new();
        for id in 2..=12 {
            let t2 = t.clone();
            later.push(tokio::spawn(
                REQUESTER.scope(Requester::new(id, 12), async move {
                    t2.acquire("s", Class::Write).await
                }),
            ));
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
        let refused = REQUESTER.scope(cr(11), t.acquire("s", Class::Write)).await;
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
        let refused = REQUESTER.scope(cr(12), t.acquire("s", Class::Write)).await;
        assert!(
            matches!(refused, Err(Refused::Queued { ahead: 11, .. })),
            "{refused:?}"
        );
        // ... and the eleventh, back, has its place again: ten ahead, not eleven.
        let refused = REQUESTER.scope(cr(11), t.acquire("s", Class::Write)).await;
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
        let near = |requester, first_write| {
            REQUESTER.sync_scope(cr(requester), || {
                t.turn_near("s", Class::Write, first_write)
            })
        };
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
        let refused = REQUESTER.scope(cr(11), t.acquire("s", Class::Write)).await;
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
        assert_eq!(
            REQUESTER.sync_scope(cr(1), || t.turn_near("s", Class::Write, true)),
            Ok(())
        );
        assert_eq!(line(&t), (0, 1), "its place is kept while it GETs");
        assert_eq!(t.waits(), 1);
        // The write takes that place and waits there: one wait, not two.
        let t2 = t.clone();
        let write = tokio::spawn(
            REQUESTER.scope(cr(1), async move { t2.acquire("s", Class::Write).await }),
        );
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
        let refused = REQUESTER
            .scope(eleventh.clone(), t.acquire("s", Class::Write))
            .await;
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
        let Err(Refused::Queued { after, .. }) = REQUESTER
            .scope(eleventh.clone(), t.acquire("s", Class::Write))
            .await
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
        t.acquire("s", Class::Read).await.unwrap();
        let mut readers = Vec::new();
        for requester in 1..=12 {
            let t2 = t.clone();
            readers.push(tokio::spawn(REQUESTER.scope(cr(requester), async move {
                t2.acquire("s", Class::Read).await
            })));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        // None was refused: all twelve still wait, none sent away.
        assert!(readers.iter().all(|r| !r.is_finished()));
        let buckets = t.buckets.lock().unwrap();
        let reads = &buckets[&("s".to_owned(), Class::Read)];
        assert_eq!((reads.line.len(), reads.away.len()), (12, 0));
        drop(buckets);
        for r in &readers {
            r.abort();
        }
    }
}
