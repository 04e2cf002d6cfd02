//! The test doubles of a benchmark, each served in a process of its own — the body of
//! `strata-bench api-server` and `strata-bench emulator` — with the process's lag ticker and
//! its endpoint. Each writes an [`Announcement`] once it serves and runs until killed.

use std::path::Path;

use strata_envtest::testenv::{self, TestEnvError};
use strata_envtest::{AppState, Config};

use super::Error;
use super::lag::Lateness;
use super::procs::Announcement;

/// The in-memory API test server with the CRDs of `crd_dir` installed, as `TestEnv` starts it,
/// and a kubeconfig for it written to `kubeconfig`.
pub async fn api_server(crd_dir: &Path, kubeconfig: &Path, ready_file: &Path) -> Result<(), Error> {
    let (lateness, _ticker) = Lateness::start();
    // Nothing reads this process's request log (ARM's requests are counted in the emulator).
    let state = AppState::new(Config {
        request_log: 0,
        ..Config::default()
    });
    testenv::install_crds(&state, &testenv::read_crds(crd_dir)?).map_err(TestEnvError::from)?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let (url, server) = testenv::serve(listener, state)?;
    std::fs::write(kubeconfig, testenv::kubeconfig(&url))?;
    let (lag, _endpoint) = lateness.serve().await?;
    Announcement {
        url,
        https_url: None,
        lag: lag.to_string(),
    }
    .write(ready_file)?;
    server
        .await
        .map_err(|e| Error::Invalid(format!("the API test server stopped: {e}")))
}

/// The ARM emulator at `time_scale`, fault-injection seed 1, its certificate written to
/// `ca_file`.
pub async fn emulator(time_scale: f64, ca_file: &Path, ready_file: &Path) -> Result<(), Error> {
    let (lateness, _ticker) = Lateness::start();
    let options = strata_armsim::Options {
        time_scale,
        seed: 1,
        ..Default::default()
    };
    let sim = strata_armsim::Server::start(options, 0).await?;
    std::fs::write(ca_file, &sim.ca_pem)?;
    let (lag, _endpoint) = lateness.serve().await?;
    Announcement {
        url: sim.url.clone(),
        https_url: Some(sim.https_url.clone()),
        lag: lag.to_string(),
    }
    .write(ready_file)?;
    sim.wait().await?;
    Ok(())
}
