//! How late a process's timers fire: a ticker every process of a benchmark run runs (the
//! benchmark's own, the API test server's, the emulator's), and the small HTTP endpoint from which
//! the benchmark reads a child process's figures.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::routing::{get, post};
use serde::{Deserialize, Serialize};
use tokio::task::JoinHandle;

use super::{Error, lock, percentile};

/// The ticker's period (real time).
const TICK: Duration = Duration::from_millis(5);

/// How late each tick of this process fired, real seconds: since the last [`Lateness::take`]
/// (the run's figure) and since the last [`Lateness::window`] (the chart's points over time).
#[derive(Clone, Default)]
pub struct Lateness(Arc<Mutex<Samples>>);

#[derive(Default)]
struct Samples {
    all: Vec<f64>,
    window: Vec<f64>,
}

/// The lateness of one process over a stretch of a run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// p99 of how late a tick fired, real seconds.
    pub p99_s: f64,
    /// Ticks measured.
    pub count: usize,
}

impl Lateness {
    /// Starts the ticker on the current runtime: every [`TICK`] it records how much later than
    /// asked its sleep ended — what every timer and wake-up of the process suffers too. It runs
    /// until the handle is aborted or the runtime stops.
    pub fn start() -> (Lateness, JoinHandle<()>) {
        let lateness = Lateness::default();
        let samples = lateness.clone();
        let ticker = tokio::spawn(async move {
            loop {
                let asked = tokio::time::Instant::now();
                tokio::time::sleep(TICK).await;
                let late = asked.elapsed().saturating_sub(TICK).as_secs_f64();
                let mut s = lock(&samples.0);
                s.all.push(late);
                s.window.push(late);
            }
        });
        (lateness, ticker)
    }

    /// The summary since the last take, the samples cleared in the same step (the window's too).
    pub fn take(&self) -> Summary {
        let mut s = lock(&self.0);
        s.window.clear();
        summary(&std::mem::take(&mut s.all))
    }

    /// The summary since the last window or take; what [`Lateness::take`] will report stays.
    pub fn window(&self) -> Summary {
        summary(&std::mem::take(&mut lock(&self.0).window))
    }

    fn peek(&self) -> Summary {
        summary(&lock(&self.0).all)
    }

    /// Serves the figures on 127.0.0.1 (a free port) until the handle is aborted or the runtime
    /// stops: `GET /lag` the [`Summary`] so far, `POST /lag/take` the same, the samples cleared
    /// under the lock that read them (a stretch's figures, none lost to the next), and
    /// `POST /lag/window` [`Lateness::window`].
    pub async fn serve(&self) -> Result<(SocketAddr, JoinHandle<()>), Error> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let app = axum::Router::new()
            .route(
                "/lag",
                get(|State(l): State<Lateness>| async move { Json(l.peek()) }),
            )
            .route(
                "/lag/take",
                post(|State(l): State<Lateness>| async move { Json(l.take()) }),
            )
            .route(
                "/lag/window",
                post(|State(l): State<Lateness>| async move { Json(l.window()) }),
            )
            .with_state(self.clone());
        let server = tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, app).await {
                tracing::error!(%e, "the lag endpoint stopped");
            }
        });
        Ok((addr, server))
    }
}

fn summary(samples: &[f64]) -> Summary {
    Summary {
        p99_s: percentile(samples, 99.0),
        count: samples.len(),
    }
}

/// `POST /lag/take` of a child process's endpoint at `addr`.
pub async fn take(http: &reqwest::Client, addr: &str) -> Result<Summary, Error> {
    lag_post(http, addr, "take").await
}

/// `POST /lag/window` of a child process's endpoint at `addr`.
pub async fn window(http: &reqwest::Client, addr: &str) -> Result<Summary, Error> {
    lag_post(http, addr, "window").await
}

async fn lag_post(http: &reqwest::Client, addr: &str, what: &str) -> Result<Summary, Error> {
    let url = format!("http://{addr}/lag/{what}");
    let fail = |e: reqwest::Error| Error::Invalid(format!("reading {url}: {e}"));
    http.post(&url)
        .send()
        .await
        .and_then(reqwest::Response::error_for_status)
        .map_err(fail)?
        .json()
        .await
        .map_err(fail)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_endpoint_hands_out_each_window_once() {
        let lateness = Lateness::default();
        lock(&lateness.0).all.extend([0.001, 0.002, 0.100]);
        let (addr, server) = lateness.serve().await.unwrap();
        let http = reqwest::Client::new();
        let peek: Summary = http
            .get(format!("http://{addr}/lag"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(
            peek,
            Summary {
                p99_s: 0.1,
                count: 3
            }
        );
        let taken = take(&http, &addr.to_string()).await.unwrap();
        assert_eq!(taken, peek);
        lock(&lateness.0).all.push(0.004);
        let next = take(&http, &addr.to_string()).await.unwrap();
        assert_eq!(
            next,
            Summary {
                p99_s: 0.004,
                count: 1
            }
        );
        assert_eq!(lateness.take(), Summary::default());
        server.abort();
    }

    #[tokio::test]
    async fn a_window_leaves_the_runs_figure_whole() {
        let lateness = Lateness::default();
        let (addr, server) = lateness.serve().await.unwrap();
        let addr = addr.to_string();
        let http = reqwest::Client::new();
        let tick = |late: f64| {
            let mut s = lock(&lateness.0);
            s.all.push(late);
            s.window.push(late);
        };
        tick(0.200);
        let first = window(&http, &addr).await.unwrap();
        assert_eq!(
            first,
            Summary {
                p99_s: 0.2,
                count: 1
            }
        );
        tick(0.003);
        let second = window(&http, &addr).await.unwrap();
        assert_eq!(
            second,
            Summary {
                p99_s: 0.003,
                count: 1
            },
            "only the ticks since the last window"
        );
        // The run's figure still has both ticks, and a take starts the windows afresh.
        assert_eq!(
            take(&http, &addr).await.unwrap(),
            Summary {
                p99_s: 0.2,
                count: 2
            }
        );
        assert_eq!(window(&http, &addr).await.unwrap(), Summary::default());
        server.abort();
    }

    #[tokio::test]
    async fn the_ticker_records_ticks() {
        let (lateness, ticker) = Lateness::start();
        // Until a tick is in (bounded): on a loaded machine a fixed sleep can end in the same
        // turn as the ticker's first sleep, and abort it before it records.
        let start = std::time::Instant::now();
        while lateness.peek().count == 0 && start.elapsed() < Duration::from_secs(10) {
            tokio::time::sleep(TICK).await;
        }
        ticker.abort();
        let s = lateness.take();
        assert!(s.count >= 1 && s.p99_s >= 0.0, "{s:?}");
    }
}
