//! ARM-rate-aware token buckets, one per subscription, principal and request class, shared by
//! every reconcile, mirroring ARM's own limits (reads 250 burst / 25 per s, writes and deletes
//! 200 / 10 per s by default). Under load the operator runs at ARM's rate instead of collecting
//! 429s. Two rooms:
//!
//! - [`buckets`]: the tokens, corrected by ARM's own answers (a 429's `Retry-After` holds a
//!   bucket; the `x-ms-ratelimit-remaining-subscription-…` headers lower it);
//! - [`line`]: the requests that found a bucket empty, in the order they are served (reads first
//!   come; writes and deletes by their kind's stage, then first come).
//!
//! [`Throttle`] joins them. Every request names its [`Requester`] — the CR whose reconcile sends
//! it, or none — so that a write sent away ([`Refused::Queued`]) keeps its place for its CR's
//! return, the CR is called back when its turn comes ([`Wake`]), and a place whose CR no longer
//! needs it is given up ([`Throttle::leave`]) or forgotten when its CR does not come back in
//! time.

mod buckets;
mod line;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use prometheus_client::metrics::counter::Counter;
use tokio::sync::Notify;

use buckets::Tokens;
pub use buckets::{Bucket, Limits};
use line::{Line, Position, WAIT_IN_PLACE};

/// Which of ARM's buckets a request draws from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Class {
    Read,
    Write,
    Delete,
}

/// The CR whose reconcile makes a request.
#[derive(Clone, Debug)]
pub struct Requester {
    /// A hash of the CR's kind, namespace and name.
    pub id: u64,
    /// Its kind's position in the dependency order (`CloudKind::stage`): in a write or delete
    /// line, a later stage goes first.
    pub stage: u8,
    /// Its namespace (a hash of it): namespaces take turns in a line, whatever their stages,
    /// so that one namespace's burst does not hold another's requests back behind all of it.
    pub tenant: u64,
    /// Calls the CR back when it was sent away and its turn comes (`None`: it comes back only
    /// when it was told to).
    pub wake: Option<Wake>,
}

impl Requester {
    /// A requester of tenant 0 that is not called back: it comes back when
    /// [`Refused::Queued`] said.
    pub fn new(id: u64, stage: u8) -> Requester {
        Requester {
            id,
            stage,
            tenant: 0,
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

/// Why a request got no token; the caller requeues instead of waiting, so that a worker is not
/// parked for the whole wait.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refused {
    /// ARM's `Retry-After` holds the bucket for this long.
    Held(Duration),
    /// A write or delete further back in the line than waiting in place allows: its turn comes
    /// in about `after`, with `ahead` before it (counted up to a bound).
    Queued { after: Duration, ahead: usize },
}

/// The shared buckets and their lines.
pub struct Throttle {
    limits: Limits,
    /// Off: every request goes out at once and ARM's own answers (429s) are the only limit —
    /// for the benchmark's model of an operator without client-side buckets.
    #[cfg(feature = "bench-hooks")]
    enabled: bool,
    /// By bucket key and class. The key is what ARM keys its buckets by: the subscription and
    /// the principal (`<subscription>/<tenant>/<client ID>`, `ArmClient::bucket`); the
    /// functions below call it `subscription` for short.
    buckets: Mutex<HashMap<(String, Class), State>>,
    waits: Counter,
    /// Counts the requests in the order they first asked (a [`Position`]'s arrival).
    arrivals: AtomicU64,
}

/// One bucket and its line.
#[derive(Debug)]
struct State {
    tokens: Tokens,
    line: Line,
}

impl State {
    /// Calls back those sent away whose turn has come — none while ARM's `Retry-After` holds
    /// the bucket.
    fn call_back(&mut self, now: Instant) {
        if self.tokens.held(now).is_none() {
            self.line.call_back(self.tokens.left);
        }
    }

    /// While ARM's `Retry-After` holds the bucket, the request at `at` is refused, its place
    /// kept through the hold for `keep_for`'s return when given.
    fn refuse_if_held(
        &mut self,
        at: Position,
        keep_for: Option<&Requester>,
        now: Instant,
    ) -> Result<(), Refused> {
        let Some(until) = self.tokens.held(now) else {
            return Ok(());
        };
        if let Some(r) = keep_for {
            self.line
                .keep_until(at, r.id, until + Duration::from_secs(10));
        }
        Err(Refused::Held(until - now))
    }

    /// Where the request at `at` stands: the tokens still to come for it and those ahead.
    fn standing(&mut self, at: Position, now: Instant) -> (f64, usize) {
        self.line.standing(at, self.tokens.left, now)
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
            #[cfg(feature = "bench-hooks")]
            enabled: true,
            buckets: Mutex::new(HashMap::new()),
            waits,
            arrivals: AtomicU64::new(1),
        }
    }

    /// The same throttle switched off: no bucket, no hold, nothing learnt from ARM's headers.
    #[cfg(feature = "bench-hooks")]
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

    /// A new position in `line` (of `class`) for a request of `requester`.
    fn arrive(&self, line: &mut Line, class: Class, requester: Option<&Requester>) -> Position {
        line.arrive(
            class,
            requester,
            self.arrivals.fetch_add(1, Ordering::Relaxed),
        )
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(String, Class), State>> {
        self.buckets
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Runs `f` on the subscription's bucket for `class`, refilled up to now; then calls back
    /// those whose turn came.
    fn with_state<T>(
        &self,
        subscription: &str,
        class: Class,
        f: impl FnOnce(&mut State, Instant) -> T,
    ) -> T {
        let bucket = self.bucket(class);
        let now = Instant::now();
        let mut buckets = self.lock();
        let state = buckets
            .entry((subscription.to_ascii_lowercase(), class))
            .or_insert_with(|| State {
                tokens: Tokens::full(bucket, now),
                line: Line::new(now),
            });
        state.tokens.refill(bucket, now);
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
        #[cfg(feature = "bench-hooks")]
        if !self.enabled {
            return Turn::NotInLine;
        }
        let now = Instant::now();
        let mut buckets = self.lock();
        let turn = buckets.iter_mut().find_map(|((_, class), state)| {
            let at = *state.line.away.get(&requester.id)?;
            let bucket = self.bucket(*class);
            state.tokens.refill(bucket, now);
            if let Err(Refused::Held(left)) = state.refuse_if_held(at, Some(requester), now) {
                return Some(Turn::Far(left));
            }
            let far = state.line.times_far(at).map_or(0, |n| n + 1);
            let (needed, _) = state.standing(at, now);
            let turn = if needed > WAIT_IN_PLACE {
                let after = state
                    .line
                    .send_away(at, requester, far, needed, bucket.rate(), now);
                Turn::Far(after)
            } else {
                Turn::Near
            };
            state.call_back(now);
            Some(turn)
        });
        turn.unwrap_or(Turn::NotInLine)
    }

    /// Before the GET that precedes `requester`'s write (its first, or one it was sent away
    /// with): when that write would stand far back in the line, the CR is sent away now
    /// ([`Refused::Queued`]) and GETs when its turn nears — a GET now would be stale by then,
    /// and spent twice. Nearer, its place is taken now and kept for the write (given up if the
    /// GET shows none is needed: [`Throttle::leave`]). Takes no token.
    pub fn turn_near(
        &self,
        subscription: &str,
        class: Class,
        requester: &Requester,
        first_write: bool,
    ) -> Result<(), Refused> {
        #[cfg(feature = "bench-hooks")]
        if !self.enabled {
            return Ok(());
        }
        let rate = self.bucket(class).rate();
        self.with_state(subscription, class, |state, now| {
            let held = state.line.away.get(&requester.id).copied();
            if held.is_none() && !first_write {
                return Ok(());
            }
            if let Some(until) = state.tokens.held(now) {
                return Err(Refused::Held(until - now));
            }
            let at = held.unwrap_or_else(|| self.arrive(&mut state.line, class, Some(requester)));
            let (needed, ahead) = state.standing(at, now);
            if needed <= 0.0 && held.is_none() {
                // A token is there for it: nothing to keep.
                return Ok(());
            }
            if held.is_none() {
                self.waits.inc();
            }
            state
                .line
                .away_if_far(at, Some(requester), (needed, ahead), rate, now)?;
            state
                .line
                .keep_until(at, requester.id, now + Duration::from_secs(30));
            Ok(())
        })
    }

    /// The CR's reconcile ended without needing the places it holds (its GET showed no write
    /// is due, it was deleted or paused, it failed otherwise): those behind move up now rather
    /// than when the places would have been forgotten.
    pub fn leave(&self, requester: u64) {
        #[cfg(feature = "bench-hooks")]
        if !self.enabled {
            return;
        }
        for state in self.lock().values_mut() {
            if let Some(at) = state.line.take(requester) {
                state.line.leave(at);
            }
        }
    }

    /// Takes a token from the subscription's bucket for this class, first come first served:
    /// at once when none is in line and a token is left; else it waits in line — unless it is a
    /// write or delete of a CR (`requester`) far back in the line: then [`Refused::Queued`],
    /// its place kept for the CR's return. [`Refused::Held`] while ARM's `Retry-After` holds the
    /// bucket (a place in line is kept through the hold).
    pub async fn acquire(
        &self,
        subscription: &str,
        class: Class,
        requester: Option<&Requester>,
    ) -> Result<(), Refused> {
        #[cfg(feature = "bench-hooks")]
        if !self.enabled {
            return Ok(());
        }
        // Reads wait in place: they are short, and a CR sent away for one would report a
        // resource that is Ready as not Ready meanwhile.
        let may_leave = requester.filter(|_| class != Class::Read);
        let rate = self.bucket(class).rate();
        let notify = Arc::new(Notify::new());
        let at = self.with_state(subscription, class, |state, now| {
            // Back from being sent away: the place it had.
            let kept = requester.and_then(|r| state.line.take(r.id));
            let at = kept.unwrap_or_else(|| self.arrive(&mut state.line, class, requester));
            state.refuse_if_held(at, requester.filter(|_| kept.is_some()), now)?;
            let (needed, ahead) = state.standing(at, now);
            if needed <= 0.0 {
                state.tokens.left -= 1.0;
                state.line.served(at);
                return Ok(None);
            }
            if kept.is_none() {
                self.waits.inc();
            }
            state
                .line
                .away_if_far(at, may_leave, (needed, ahead), rate, now)?;
            state.line.wait_at(at, notify.clone());
            Ok(Some(at))
        })?;
        let Some(at) = at else { return Ok(()) };
        let mut in_line = InLine {
            throttle: self,
            subscription,
            class,
            at,
            kept: false,
        };
        loop {
            let needed = self.with_state(subscription, class, |state, now| {
                // Its place is kept through the hold for the CR's return.
                state.refuse_if_held(at, requester, now)?;
                let (needed, ahead) = state.standing(at, now);
                if needed <= 0.0 {
                    state.tokens.left -= 1.0;
                    state.line.served(at);
                }
                // Overtaken while it waited (writes of a later stage went ahead): sent away
                // rather than hold its reconcile worker for a turn no longer near.
                state
                    .line
                    .away_if_far(at, may_leave, (needed, ahead), rate, now)?;
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
        #[cfg(feature = "bench-hooks")]
        if !self.enabled {
            return;
        }
        self.with_state(subscription, class, |state, now| {
            let until = state.tokens.hold(retry_after, now);
            state.line.keep_through(until);
        });
    }

    /// How long ARM's `Retry-After` still holds the bucket back (zero: not held).
    pub fn held_for(&self, subscription: &str, class: Class) -> Duration {
        self.with_state(subscription, class, |state, now| {
            state
                .tokens
                .held(now)
                .map_or(Duration::ZERO, |u| u.saturating_duration_since(now))
        })
    }

    /// ARM said how many requests of this class it still allows
    /// (`x-ms-ratelimit-remaining-subscription-…`): when that is fewer than our bucket holds,
    /// ARM's count wins (another client of the subscription spends the same budget).
    pub fn observe_remaining(&self, subscription: &str, class: Class, remaining: u64) {
        #[cfg(feature = "bench-hooks")]
        if !self.enabled {
            return;
        }
        self.with_state(subscription, class, |state, _| {
            let ours = state.tokens.left;
            if state.tokens.lower_to(remaining) {
                tracing::debug!(
                    bucket = subscription,
                    ?class,
                    ours,
                    arm = state.tokens.left,
                    "ARM's remaining count is lower: the bucket follows it"
                );
            }
        });
    }

    /// Tokens left in a bucket (tests and diagnostics).
    pub fn tokens(&self, subscription: &str, class: Class) -> f64 {
        self.with_state(subscription, class, |state, _| state.tokens.left)
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
    at: Position,
    kept: bool,
}

impl Drop for InLine<'_> {
    fn drop(&mut self) {
        if self.kept {
            return;
        }
        self.throttle
            .with_state(self.subscription, self.class, |state, _| {
                state.line.leave(self.at);
            });
    }
}
