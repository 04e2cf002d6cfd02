//! The emulator's whole state behind one lock, and simulated time.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::auth::Registry;
use crate::faults::Faults;
use crate::log::RequestLog;
use crate::lro::Operations;
use crate::store::Store;
use crate::throttle::{Throttle, ThrottleConfig};

/// Start-up options (the binary's flags).
#[derive(Debug, Clone)]
pub struct Options {
    /// Real seconds per simulated second: 0.01 makes a 60 s VM creation take 0.6 s; 0 makes
    /// every operation complete at once.
    pub time_scale: f64,
    /// Seed of the fault-injection random numbers.
    pub seed: u64,
    pub throttle: ThrottleConfig,
}

impl Options {
    /// Checks what would fail later: the time scale must be a finite number, 0 or more.
    pub fn validate(&self) -> Result<(), crate::Error> {
        if !(self.time_scale.is_finite() && self.time_scale >= 0.0) {
            return Err(crate::Error::Options(format!(
                "time scale must be a finite number >= 0, not {}",
                self.time_scale
            )));
        }
        Ok(())
    }
}

impl Default for Options {
    fn default() -> Self {
        Self {
            time_scale: 1.0,
            seed: 0,
            throttle: ThrottleConfig::default(),
        }
    }
}

pub struct Sim {
    pub options: Options,
    pub store: Store,
    pub ops: Operations,
    pub auth: Registry,
    pub throttle: Throttle,
    pub faults: Faults,
    pub log: RequestLog,
}

impl Sim {
    pub fn new(options: Options) -> Self {
        Self {
            store: Store::default(),
            ops: Operations::default(),
            auth: Registry::default(),
            throttle: Throttle::new(options.throttle.clone()),
            faults: Faults::new(options.seed),
            log: RequestLog::default(),
            options,
        }
    }

    /// Forgets everything except issued tokens (clients cache them).
    pub fn reset(&mut self) {
        let tokens = std::mem::take(&mut self.auth.tokens);
        *self = Sim::new(self.options.clone());
        self.auth.tokens = tokens;
    }

    /// Real duration of `seconds` of simulated time.
    pub fn scaled(&self, seconds: f64) -> Duration {
        Duration::from_secs_f64((seconds * self.options.time_scale).max(0.0))
    }

    /// Completes every operation whose time has come.
    pub fn advance(&mut self) {
        crate::lro::complete_due(self, Instant::now());
    }
}

/// Shared handle to the emulator state; the axum state.
#[derive(Clone)]
pub struct App(Arc<Mutex<Sim>>);

impl App {
    pub fn new(options: Options) -> Self {
        App(Arc::new(Mutex::new(Sim::new(options))))
    }
    /// Locks the state. A panic while holding the lock is a bug; the state is still usable.
    pub fn lock(&self) -> MutexGuard<'_, Sim> {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}
