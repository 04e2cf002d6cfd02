//! Seeds: etcd data directories of a control plane that has booted and installed a set of CRDs
//! and namespaces, kept in the temporary directory and copied into every later control plane
//! with the same binaries, CRDs and namespaces.
//!
//! Why: in the `KUBEBUILDER_ASSETS` pass every test starts its own etcd and kube-apiserver, and
//! that start was most of the pass's CPU (about 3 s per test, of which about 1.3 s went to
//! bootstrapping an empty etcd — RBAC roles, priority levels — and to installing the CRDs). A
//! kube-apiserver on a seeded etcd finds all of that in place and only builds its handlers: the
//! state a test sees is the same, the processes are still its own.
//!
//! etcd is crash-safe (its write-ahead log is fsynced before it answers), so a data directory
//! copied after the process was killed is a consistent one; it is copied with holes where the
//! preallocated log is still zeros, so a seed costs about a megabyte.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;
use sha2::{Digest, Sha256};

use super::Binaries;
use crate::testenv::TestEnvError;

/// Where seeds are kept, below the temporary directory.
const SEED_DIR: &str = "strata-envtest-etcd-seeds";
/// How often a test waiting for another process's seed looks again.
const LOCK_POLL: Duration = Duration::from_millis(100);
/// The longest a test waits for another process to finish a seed before booting without one.
const LOCK_TIMEOUT: Duration = Duration::from_secs(180);

/// Changed whenever what goes into a seed changes, so that older seeds are not used.
const SEED_FORMAT: &[u8] = b"strata-envtest-seed-3";

/// What a seed depends on: the two binaries (path, size, modification time), the CRDs and the
/// namespaces, hashed. Another kube-apiserver, CRD or namespace list gets another seed.
pub fn key(bins: &Binaries, crds: &[Value], namespaces: &[String]) -> String {
    let mut h = Sha256::new();
    h.update(SEED_FORMAT);
    for bin in [&bins.kube_apiserver, &bins.etcd] {
        h.update(bin.as_os_str().as_encoded_bytes());
        // Follow links: the etcd of the assets directory is a link to the installed one.
        if let Ok(m) = std::fs::metadata(bin) {
            h.update(m.len().to_le_bytes());
            if let Ok(t) = m
                .modified()
                .map(|t| t.duration_since(std::time::UNIX_EPOCH))
            {
                h.update(t.unwrap_or_default().as_nanos().to_le_bytes());
            }
        }
    }
    for crd in crds {
        h.update(crd.to_string().as_bytes());
        h.update([0]);
    }
    for ns in namespaces {
        h.update(ns.as_bytes());
        h.update([0]);
    }
    h.finalize()
        .iter()
        .take(16)
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The directory of the seed with this key, if one is ready.
pub fn find(key: &str) -> Option<PathBuf> {
    let dir = std::env::temp_dir().join(SEED_DIR).join(key);
    dir.is_dir().then_some(dir)
}

/// The seed with this key: found, or made by `boot`, which boots a control plane from an empty
/// etcd, stops it and copies etcd's data directory to the path it is given.
/// One process makes a seed while the others wait for it (a lock file per key). `None` when no
/// seed could be made; the caller then boots without one.
pub async fn get_or_make<F, Fut>(key: &str, boot: F) -> Option<PathBuf>
where
    F: FnOnce(PathBuf) -> Fut,
    Fut: std::future::Future<Output = Result<(), TestEnvError>>,
{
    if let Some(found) = find(key) {
        return Some(found);
    }
    match make(key, boot).await {
        Ok(dir) => Some(dir),
        Err(e) => {
            tracing::warn!(error = %e, "strata-envtest: no etcd seed, booting from an empty etcd");
            None
        }
    }
}

async fn make<F, Fut>(key: &str, boot: F) -> Result<PathBuf, TestEnvError>
where
    F: FnOnce(PathBuf) -> Fut,
    Fut: std::future::Future<Output = Result<(), TestEnvError>>,
{
    let root = std::env::temp_dir().join(SEED_DIR);
    std::fs::create_dir_all(&root)?;
    let lock = File::create(root.join(format!("{key}.lock")))?;
    let waited = tokio::time::Instant::now();
    loop {
        match lock.try_lock() {
            Ok(()) => break,
            Err(std::fs::TryLockError::WouldBlock) if waited.elapsed() < LOCK_TIMEOUT => {
                tokio::time::sleep(LOCK_POLL).await;
            }
            Err(std::fs::TryLockError::WouldBlock) => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    "another process has held the seed's lock for too long",
                )
                .into());
            }
            Err(std::fs::TryLockError::Error(e)) => return Err(e.into()),
        }
    }
    // Another process may have made it while this one waited.
    let target = root.join(key);
    if target.is_dir() {
        return Ok(target);
    }
    let partial = root.join(format!("{key}.partial-{}", uuid::Uuid::new_v4()));
    let made = match boot(partial.clone()).await {
        Ok(()) => std::fs::rename(&partial, &target).map_err(TestEnvError::from),
        Err(e) => Err(e),
    };
    if let Err(e) = made {
        let _ = std::fs::remove_dir_all(&partial);
        return Err(e);
    }
    tracing::info!(seed = %target.display(), "strata-envtest: etcd seed made");
    Ok(target)
}

/// Copy a directory tree; runs of zeros in files become holes.
pub fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let dest = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_tree(&entry.path(), &dest)?;
        } else {
            copy_sparse(&entry.path(), &dest)?;
        }
    }
    Ok(())
}

/// Copy a file, seeking over blocks that are all zeros (etcd preallocates its 64 MB log files).
fn copy_sparse(from: &Path, to: &Path) -> std::io::Result<()> {
    const BLOCK: usize = 64 * 1024;
    let mut src = File::open(from)?;
    let mut dst = File::create(to)?;
    let mut buf = vec![0u8; BLOCK];
    let mut len = 0u64;
    loop {
        let n = read_full(&mut src, &mut buf)?;
        if n == 0 {
            break;
        }
        if buf[..n].iter().all(|b| *b == 0) {
            dst.seek(SeekFrom::Current(n as i64))?;
        } else {
            dst.write_all(&buf[..n])?;
        }
        len += n as u64;
    }
    // A trailing hole is only a length.
    dst.set_len(len)?;
    dst.set_permissions(std::fs::metadata(from)?.permissions())
}

fn read_full(f: &mut File, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match f.read(&mut buf[n..])? {
            0 => break,
            k => n += k,
        }
    }
    Ok(n)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn a_sparse_copy_has_the_same_bytes_and_length() {
        let dir = super::super::TempDir::new("strata-envtest-seed-test").unwrap();
        let from = dir.path().join("from");
        std::fs::create_dir_all(from.join("member/wal")).unwrap();
        // A record, a preallocated run of zeros, another record and a zero tail: etcd's log.
        let mut bytes = vec![7u8; 100];
        bytes.extend(vec![0u8; 200_000]);
        bytes.extend(vec![9u8; 10]);
        bytes.extend(vec![0u8; 300_000]);
        std::fs::write(from.join("member/wal/0.wal"), &bytes).unwrap();
        std::fs::write(from.join("member/db"), b"db").unwrap();

        let to = dir.path().join("to");
        copy_tree(&from, &to).unwrap();
        assert_eq!(std::fs::read(to.join("member/wal/0.wal")).unwrap(), bytes);
        assert_eq!(std::fs::read(to.join("member/db")).unwrap(), b"db");
    }

    #[test]
    fn the_key_changes_with_the_crds_and_the_namespaces() {
        let bins = Binaries {
            kube_apiserver: "/nonexistent/kube-apiserver".into(),
            etcd: "/nonexistent/etcd".into(),
        };
        let crd =
            serde_json::json!({"kind": "CustomResourceDefinition", "metadata": {"name": "a.b"}});
        let base = key(&bins, std::slice::from_ref(&crd), &["ns".into()]);
        assert_eq!(base, key(&bins, std::slice::from_ref(&crd), &["ns".into()]));
        assert_ne!(base, key(&bins, &[], &["ns".into()]));
        assert_ne!(
            base,
            key(&bins, std::slice::from_ref(&crd), &["other".into()])
        );
        let other_bins = Binaries {
            kube_apiserver: "/elsewhere/kube-apiserver".into(),
            ..bins.clone()
        };
        assert_ne!(
            base,
            key(&other_bins, std::slice::from_ref(&crd), &["ns".into()])
        );
    }
}
