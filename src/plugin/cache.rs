//! The on-disk cache of compiled plugins, which nobody else can plant.
//!
//! Cached native code is loaded with wasmtime's `deserialize`, which trusts
//! it completely: whoever can put a file there runs code inside the node,
//! with its cloud credentials, and bypasses the sha256 pin. So:
//!
//! - the directory must be a real directory (not a symlink), owned by the
//!   user the node runs as, and writable by nobody else; otherwise the
//!   cache is not used at all (plugins compile in memory) and the node
//!   says why;
//! - every entry carries an HMAC-SHA256 tag, keyed by a random node-local
//!   key kept in the directory with mode 0600, over the `.wasm` file's
//!   sha256, this engine's compatibility hash and the native bytes; an
//!   entry whose tag does not verify is never deserialized, only replaced;
//! - entries are read into memory once and verified there, so the bytes
//!   deserialized are the bytes checked.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use hmac::{Hmac, Mac};
use sha2::Sha256;

type Tag = Hmac<Sha256>;

const KEY_FILE: &str = "cache.key";
const KEY_BYTES: usize = 32;
const TAG_BYTES: usize = 32;
/// Entries larger than this are not ones this node wrote.
const MAX_ENTRY_BYTES: u64 = 512 * 1024 * 1024;

/// A cache directory that passed its checks, with its key.
pub struct CompileCache {
    dir: PathBuf,
    key: [u8; KEY_BYTES],
}

impl std::fmt::Debug for CompileCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompileCache")
            .field("dir", &self.dir)
            .finish()
    }
}

/// Why an entry was not used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Rejected {
    #[error("no entry")]
    Absent,
    #[error("{0}")]
    Unreadable(String),
    #[error("its tag does not match this node's key (planted or corrupt)")]
    BadTag,
}

impl CompileCache {
    /// Opens (creating if missing) a private cache directory and its key,
    /// or says why the directory cannot be trusted.
    pub fn open(dir: &Path) -> Result<CompileCache, String> {
        if !dir.exists() {
            std::fs::create_dir_all(dir).map_err(|e| format!("cannot create it: {e}"))?;
            set_mode(dir, 0o700).map_err(|e| format!("cannot make it private: {e}"))?;
        }
        check_private(dir, true)?;
        let key = read_or_create_key(&dir.join(KEY_FILE))?;
        Ok(CompileCache {
            dir: dir.to_path_buf(),
            key,
        })
    }

    fn entry_path(&self, sha256: &str, compatibility: &str) -> PathBuf {
        self.dir.join(format!("{sha256}-{compatibility}.cwasm"))
    }

    /// The verified native code for a plugin, or why there is none usable.
    pub fn load(&self, sha256: &str, compatibility: &str) -> Result<Vec<u8>, Rejected> {
        let path = self.entry_path(sha256, compatibility);
        let bytes = match read_regular_file(&path, MAX_ENTRY_BYTES) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(Rejected::Absent),
            Err(e) => return Err(Rejected::Unreadable(e.to_string())),
        };
        if bytes.len() < TAG_BYTES {
            return Err(Rejected::BadTag);
        }
        let (tag, native) = bytes.split_at(TAG_BYTES);
        let mut mac = self.mac(sha256, compatibility);
        mac.update(native);
        mac.verify_slice(tag).map_err(|_| Rejected::BadTag)?;
        Ok(native.to_vec())
    }

    /// Stores native code under its tag, atomically (a temporary file in
    /// the directory, then a rename over any old entry).
    pub fn store(&self, sha256: &str, compatibility: &str, native: &[u8]) -> std::io::Result<()> {
        let mut mac = self.mac(sha256, compatibility);
        mac.update(native);
        let tag = mac.finalize().into_bytes();
        let mut file = tempfile::NamedTempFile::new_in(&self.dir)?;
        file.write_all(&tag)?;
        file.write_all(native)?;
        file.persist(self.entry_path(sha256, compatibility))
            .map_err(|e| e.error)?;
        Ok(())
    }

    /// A MAC over what the entry is for, ready for the native bytes.
    fn mac(&self, sha256: &str, compatibility: &str) -> Tag {
        let mut mac = Tag::new_from_slice(&self.key).expect("HMAC takes any key length");
        mac.update(sha256.as_bytes());
        mac.update(b"\0");
        mac.update(compatibility.as_bytes());
        mac.update(b"\0");
        mac
    }
}

/// Refuses a path that is a symlink, not a directory (or regular file),
/// not owned by this user, or writable (or, for files, readable) by
/// others.
fn check_private(path: &Path, is_dir: bool) -> Result<(), String> {
    let meta = std::fs::symlink_metadata(path).map_err(|e| format!("cannot inspect it: {e}"))?;
    if meta.file_type().is_symlink() {
        return Err("it is a symbolic link".into());
    }
    if is_dir && !meta.is_dir() {
        return Err("it is not a directory".into());
    }
    if !is_dir && !meta.is_file() {
        return Err("it is not a regular file".into());
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        // Safety: geteuid has no preconditions and cannot fail.
        let me = unsafe { libc::geteuid() };
        if meta.uid() != me {
            return Err(format!(
                "it is owned by uid {}, not by this process's uid {me}",
                meta.uid()
            ));
        }
        let forbidden = if is_dir { 0o022 } else { 0o077 };
        if meta.mode() & forbidden != 0 {
            return Err(format!(
                "its mode {:o} lets others {} it (want {})",
                meta.mode() & 0o777,
                if is_dir { "write to" } else { "read or write" },
                if is_dir { "0700" } else { "0600" }
            ));
        }
    }
    Ok(())
}

/// The node-local key: read if it exists (and is private), else created
/// with mode 0600 from the OS's random source.
fn read_or_create_key(path: &Path) -> Result<[u8; KEY_BYTES], String> {
    let mut key = [0u8; KEY_BYTES];
    if std::fs::symlink_metadata(path).is_ok() {
        check_private(path, false).map_err(|e| format!("key {}: {e}", path.display()))?;
        let bytes = read_regular_file(path, KEY_BYTES as u64 + 1)
            .map_err(|e| format!("key {}: {e}", path.display()))?;
        if bytes.len() != KEY_BYTES {
            return Err(format!(
                "key {}: not a {KEY_BYTES}-byte key",
                path.display()
            ));
        }
        key.copy_from_slice(&bytes);
        return Ok(key);
    }
    getrandom::fill(&mut key).map_err(|e| format!("no random key: {e}"))?;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options
        .open(path)
        .map_err(|e| format!("key {}: {e}", path.display()))?;
    file.write_all(&key)
        .map_err(|e| format!("key {}: {e}", path.display()))?;
    Ok(key)
}

/// Reads a regular file that is not a symlink, at most `limit` bytes; the
/// file opened must be the one inspected (no swap in between).
fn read_regular_file(path: &Path, limit: u64) -> std::io::Result<Vec<u8>> {
    let before = std::fs::symlink_metadata(path)?;
    if !before.is_file() {
        return Err(std::io::Error::other("not a regular file (a symlink?)"));
    }
    let file = std::fs::File::open(path)?;
    let opened = file.metadata()?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        if (before.dev(), before.ino()) != (opened.dev(), opened.ino()) {
            return Err(std::io::Error::other("replaced while being opened"));
        }
    }
    if opened.len() > limit {
        return Err(std::io::Error::other(format!(
            "{} bytes, more than {limit}",
            opened.len()
        )));
    }
    let mut bytes = Vec::with_capacity(opened.len() as usize);
    file.take(limit).read_to_end(&mut bytes)?;
    Ok(bytes)
}

#[cfg(unix)]
fn set_mode(path: &Path, mode: u32) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
}

#[cfg(not(unix))]
fn set_mode(_path: &Path, _mode: u32) -> std::io::Result<()> {
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_round_trip_and_planted_ones_are_rejected() {
        let parent = tempfile::tempdir().unwrap();
        let dir = parent.path().join("cache");
        let cache = CompileCache::open(&dir).unwrap();
        assert_eq!(cache.load("abc", "c1"), Err(Rejected::Absent));
        cache.store("abc", "c1", b"native code").unwrap();
        assert_eq!(cache.load("abc", "c1").unwrap(), b"native code");
        assert_eq!(
            CompileCache::open(&dir).unwrap().load("abc", "c1").unwrap(),
            b"native code",
            "the key persists"
        );
        // Right name, other contents: a planted file, or an entry moved
        // from another plugin or engine.
        let entry = dir.join("abc-c1.cwasm");
        std::fs::write(&entry, [vec![0u8; 32], b"evil code".to_vec()].concat()).unwrap();
        assert_eq!(cache.load("abc", "c1"), Err(Rejected::BadTag));
        cache.store("abc", "c1", b"native code").unwrap();
        std::fs::copy(&entry, dir.join("xyz-c1.cwasm")).unwrap();
        assert_eq!(cache.load("xyz", "c1"), Err(Rejected::BadTag));
        std::fs::write(&entry, b"short").unwrap();
        assert_eq!(cache.load("abc", "c1"), Err(Rejected::BadTag));
        // Another node's key signs nothing here.
        let other_dir = parent.path().join("other");
        let other = CompileCache::open(&other_dir).unwrap();
        other.store("abc", "c1", b"native code").unwrap();
        std::fs::copy(other_dir.join("abc-c1.cwasm"), &entry).unwrap();
        assert_eq!(cache.load("abc", "c1"), Err(Rejected::BadTag));
    }

    #[cfg(unix)]
    #[test]
    fn shared_or_linked_directories_and_keys_are_refused() {
        let parent = tempfile::tempdir().unwrap();
        let dir = parent.path().join("cache");
        CompileCache::open(&dir).unwrap();
        set_mode(&dir, 0o770).unwrap();
        let err = CompileCache::open(&dir).unwrap_err();
        assert!(err.contains("mode 770 lets others write to it"), "{err}");
        set_mode(&dir, 0o700).unwrap();
        let link = parent.path().join("link");
        std::os::unix::fs::symlink(&dir, &link).unwrap();
        assert_eq!(
            CompileCache::open(&link).unwrap_err(),
            "it is a symbolic link"
        );
        set_mode(&dir.join(KEY_FILE), 0o644).unwrap();
        let err = CompileCache::open(&dir).unwrap_err();
        assert!(err.contains("key") && err.contains("mode 644"), "{err}");
        // An entry that is a symlink to a valid entry is not read.
        set_mode(&dir.join(KEY_FILE), 0o600).unwrap();
        let cache = CompileCache::open(&dir).unwrap();
        cache.store("abc", "c1", b"native").unwrap();
        std::fs::rename(dir.join("abc-c1.cwasm"), parent.path().join("real")).unwrap();
        std::os::unix::fs::symlink(parent.path().join("real"), dir.join("abc-c1.cwasm")).unwrap();
        assert!(matches!(
            cache.load("abc", "c1"),
            Err(Rejected::Unreadable(_))
        ));
    }
}
