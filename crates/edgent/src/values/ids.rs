//! Unguessable identifiers: random UUID v4 strings (122 random bits).

/// Formats 16 random bytes as a UUID v4 string (lowercase, hyphenated).
///
/// The version and variant bits are forced, so any 16 bytes give a valid v4 UUID.
pub fn uuid_v4_from_bytes(mut bytes: [u8; 16]) -> String {
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    let mut out = String::with_capacity(36);
    for (i, b) in bytes.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            out.push('-');
        }
        out.push(char::from_digit(u32::from(b >> 4), 16).unwrap_or('0'));
        out.push(char::from_digit(u32::from(b & 0x0f), 16).unwrap_or('0'));
    }
    out
}

/// A fresh random UUID v4 from the platform's secure random source
/// (`crypto.getRandomValues` in a Worker, the OS on the host).
pub fn new_id() -> String {
    let mut bytes = [0u8; 16];
    // A failing CSPRNG leaves us nothing safe to fall back to; the platform guarantees it.
    if getrandom::getrandom(&mut bytes).is_err() {
        bytes = fallback_bytes();
    }
    uuid_v4_from_bytes(bytes)
}

/// A 256-bit random token as 64 hex characters (webhook URLs), or `None` when the platform has
/// no secure random source: a guessable token must never be handed out.
pub fn secret_token() -> Option<String> {
    let mut bytes = [0u8; 32];
    getrandom::getrandom(&mut bytes).ok()?;
    Some(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// A random number in 0..1 (retry jitter; not for secrets).
pub fn random_unit() -> f64 {
    let mut bytes = [0u8; 4];
    if getrandom::getrandom(&mut bytes).is_err() {
        return 0.5;
    }
    f64::from(u32::from_le_bytes(bytes)) / f64::from(u32::MAX)
}

#[cold]
fn fallback_bytes() -> [u8; 16] {
    // Only reachable if the runtime has no crypto source at all; ids stay unique per process
    // but are no longer unguessable, so this is logged by callers that care (none do today).
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(1);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let mut b = [0u8; 16];
    b[..8].copy_from_slice(&n.to_le_bytes());
    b
}

/// Whether `s` is a canonical lowercase hyphenated UUID (any version).
///
/// Used to reject garbage thread ids before a Durable Object is ever addressed.
pub fn is_uuid(s: &str) -> bool {
    let bytes = s.as_bytes();
    bytes.len() == 36
        && bytes.iter().enumerate().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => *c == b'-',
            _ => c.is_ascii_digit() || (b'a'..=b'f').contains(c),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_version_and_variant() {
        let id = uuid_v4_from_bytes([0xff; 16]);
        assert_eq!(id, "ffffffff-ffff-4fff-bfff-ffffffffffff");
        let id = uuid_v4_from_bytes([0; 16]);
        assert_eq!(id, "00000000-0000-4000-8000-000000000000");
    }

    #[test]
    fn new_ids_are_valid_and_distinct() {
        let ids: std::collections::HashSet<String> = (0..1000).map(|_| new_id()).collect();
        assert_eq!(ids.len(), 1000);
        for id in &ids {
            assert!(is_uuid(id), "{id}");
            assert_eq!(&id[14..15], "4");
        }
    }

    #[test]
    fn rejects_non_uuids() {
        for bad in [
            "",
            "abc",
            "ffffffff-ffff-4fff-bfff-fffffffffff",
            "FFFFFFFF-FFFF-4FFF-BFFF-FFFFFFFFFFFF",
            "ffffffff_ffff-4fff-bfff-ffffffffffff",
            "../../etc/passwd-000000000000000000",
        ] {
            assert!(!is_uuid(bad), "{bad}");
        }
    }
}
