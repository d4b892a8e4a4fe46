//! Records the resolved SlateDB version (from Cargo.lock) for heartbeats.

fn main() {
    println!("cargo:rerun-if-changed=Cargo.lock");
    let lock = std::fs::read_to_string("Cargo.lock").unwrap_or_default();
    let version = slatedb_version(&lock).unwrap_or("unknown");
    println!("cargo:rustc-env=SLEET_SLATEDB_VERSION={version}");
}

fn slatedb_version(lock: &str) -> Option<&str> {
    let mut lines = lock.lines();
    while let Some(line) = lines.next() {
        if line.trim() == "name = \"slatedb\"" {
            let version = lines.next()?.trim().strip_prefix("version = \"")?;
            return version.strip_suffix('"');
        }
    }
    None
}
