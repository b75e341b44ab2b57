//! Files only their owner can read or write (traces, plans, pages, report bundles: DESIGN §8
//! hardening). A leaf: every command writes with it, and it names none of them.

use std::path::Path;

/// Write a file only its owner can read or write.
pub fn write_private(path: &Path, text: &str) -> Result<(), String> {
    write_private_bytes(path, text.as_bytes())
}

/// [`write_private`] for bytes.
pub fn write_private_bytes(path: &Path, bytes: &[u8]) -> Result<(), String> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    // `mode` applies only to a new file; an existing one is narrowed too.
    use std::os::unix::fs::PermissionsExt;
    f.set_permissions(std::fs::Permissions::from_mode(0o600))
        .map_err(|e| format!("cannot restrict {}: {e}", path.display()))?;
    f.write_all(bytes)
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}
