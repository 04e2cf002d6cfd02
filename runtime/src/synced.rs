//! "Has this watch listed once?", for any number of waiters.
//!
//! kube-runtime 5's `Store::wait_until_ready` keeps one waker: when several tasks wait on the
//! same store (the controller itself, a health check, concurrent reconciles), only the last to
//! poll is woken and the others wait forever. A watch marks a [`Synced`] on its `InitDone`
//! event instead, and everyone waits on that.

use std::time::Duration;

use kube::runtime::watcher;

/// Set once, when a watch has delivered its first complete list; cheap to clone and to wait on.
#[derive(Clone, Debug)]
pub struct Synced {
    tx: tokio::sync::watch::Sender<bool>,
}

impl Default for Synced {
    fn default() -> Self {
        Synced {
            tx: tokio::sync::watch::channel(false).0,
        }
    }
}

impl Synced {
    /// Marks the watch synced when `event` ends its first list (a restarted watch's later
    /// lists change nothing: the store was complete once and stays usable).
    pub fn observe<K>(&self, event: &Result<watcher::Event<K>, watcher::Error>) {
        if matches!(event, Ok(watcher::Event::InitDone)) {
            self.tx.send_replace(true);
        }
    }

    pub fn is_synced(&self) -> bool {
        *self.tx.borrow()
    }

    /// Waits until synced, at most `limit`; whether it is.
    pub async fn wait(&self, limit: Duration) -> bool {
        let mut rx = self.tx.subscribe();
        matches!(
            tokio::time::timeout(limit, rx.wait_for(|synced| *synced)).await,
            Ok(Ok(_))
        )
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn every_waiter_is_woken_by_the_first_list() {
        let synced = Synced::default();
        let waiters: Vec<_> = (0..8)
            .map(|_| {
                let s = synced.clone();
                tokio::spawn(async move { s.wait(Duration::from_secs(5)).await })
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!synced.is_synced());
        synced.observe::<k8s_openapi::api::core::v1::ConfigMap>(&Ok(watcher::Event::Init));
        assert!(!synced.is_synced(), "the list has only begun");
        synced.observe::<k8s_openapi::api::core::v1::ConfigMap>(&Ok(watcher::Event::InitDone));
        for w in waiters {
            assert!(w.await.unwrap(), "woken");
        }
        assert!(synced.is_synced());
        assert!(
            !Synced::default().wait(Duration::from_millis(10)).await,
            "bounded"
        );
    }
}
