//! `redact_emails`: masks e-mail addresses in user messages before they are stored, so the
//! addresses never reach the database, the model or other clients.
//!
//! An address is `local@domain.tld`: a local part of letters, digits and `. _ % + -`, and a
//! domain of at least two dot-separated labels ending in an alphabetic top-level domain of two
//! letters or more. `user@localhost` and `@handles` are left alone. Only the content of `user`
//! messages is changed; assistant replies and tool results are not.

use edgent::prelude::*;

/// What replaces each address.
pub const MASK: &str = "[email redacted]";

/// Registered as `redact_emails` (the file stem).
pub fn hook() -> Hook {
    Hook::before_create_message(|_ctx, mut message: Message| {
        if message.role == Role::User {
            message.content = mask_emails(&message.content);
        }
        Ok(message)
    })
}

/// `text` with every e-mail address replaced by [`MASK`].
pub fn mask_emails(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut copied = 0; // `text[..copied]` is already in `out`
    let mut at = 0;
    while at < bytes.len() {
        if bytes[at] != b'@' {
            at += 1;
            continue;
        }
        // Every boundary below sits next to an ASCII byte found by these scans, so it is a
        // char boundary and the slices cannot panic on multi-byte text.
        let mut start = at;
        while start > copied && is_local(bytes[start - 1]) {
            start -= 1;
        }
        while start < at && bytes[start] == b'.' {
            start += 1; // an ellipsis before the address ("...bob@x.com") is not part of it
        }
        let mut end = at + 1;
        while end < bytes.len() && is_domain(bytes[end]) {
            end += 1;
        }
        while end > at + 1 && matches!(bytes[end - 1], b'.' | b'-') {
            end -= 1; // a full stop after the address ends the sentence, not the domain
        }
        if start < at && is_domain_name(&text[at + 1..end]) {
            out.push_str(&text[copied..start]);
            out.push_str(MASK);
            copied = end;
            at = end;
        } else {
            at += 1;
        }
    }
    out.push_str(&text[copied..]);
    out
}

fn is_local(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'%' | b'+' | b'-')
}

fn is_domain(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-')
}

/// At least two labels, none empty or starting/ending with `-`, the last alphabetic (2+).
fn is_domain_name(domain: &str) -> bool {
    let labels: Vec<&str> = domain.split('.').collect();
    let tld_ok = labels
        .last()
        .is_some_and(|t| t.len() >= 2 && t.bytes().all(|b| b.is_ascii_alphabetic()));
    labels.len() >= 2
        && tld_ok
        && labels
            .iter()
            .all(|l| !l.is_empty() && !l.starts_with('-') && !l.ends_with('-'))
}
