//! Removing secret values from text bound for storage, clients and logs.
//!
//! A tool that reads a secret (`flow.secret`) may quote it back by accident: an error that
//! names the URL it fetched carries the key in the query string, percent-encoded. The runtime
//! removes every secret a run read from that run's result and error text, in the forms a URL
//! or a form body would carry it.

use std::borrow::Cow;

/// What a secret becomes in redacted text.
pub const REDACTED: &str = "[redacted]";

/// Secrets shorter than this are not searched for: they would match ordinary text.
const MIN_SECRET_LEN: usize = 4;

/// `text` with every occurrence of each secret replaced by [`REDACTED`]: the value itself and
/// its percent-encoded forms (upper- and lower-case hex, and the form encoding with `+` for
/// spaces).
///
/// The longest forms go first, whatever the order of `secrets`: a secret inside another (a
/// key and the same key with a suffix) would otherwise be cut out of the longer one first,
/// leaving the rest of it in the text.
pub fn redact_secrets<'a>(text: &'a str, secrets: &[String]) -> Cow<'a, str> {
    let mut forms: Vec<String> = secrets
        .iter()
        .filter(|s| s.len() >= MIN_SECRET_LEN)
        .flat_map(|s| encodings(s))
        .collect();
    forms.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
    forms.dedup();
    let mut out = Cow::Borrowed(text);
    for form in forms {
        if out.contains(form.as_str()) {
            out = Cow::Owned(out.replace(form.as_str(), REDACTED));
        }
    }
    out
}

/// The secret as written, then its distinct encoded forms.
fn encodings(secret: &str) -> Vec<String> {
    let mut forms = vec![secret.to_owned()];
    for form in [
        percent_encode(secret, false, false),
        percent_encode(secret, true, false),
        percent_encode(secret, false, true),
    ] {
        if !forms.contains(&form) {
            forms.push(form);
        }
    }
    forms
}

/// Percent-encodes every byte outside RFC 3986's unreserved set; `lower` writes lower-case
/// hex, `form` writes a space as `+` (`application/x-www-form-urlencoded`).
fn percent_encode(text: &str, lower: bool, form: bool) -> String {
    const UPPER: &[u8; 16] = b"0123456789ABCDEF";
    const LOWER: &[u8; 16] = b"0123456789abcdef";
    let hex = if lower { LOWER } else { UPPER };
    let mut out = String::with_capacity(text.len());
    for &b in text.as_bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                out.push(char::from(b));
            }
            b' ' if form => out.push('+'),
            _ => {
                out.push('%');
                out.push(char::from(hex[usize::from(b >> 4)]));
                out.push(char::from(hex[usize::from(b & 15)]));
            }
        }
    }
    out
}

/// What a call waits for, as a watcher may see it: without any webhook `url` (its token is a
/// single-use capability for the outside system, not for people watching the thread), the
/// `url`s of a race's webhooks (`{"race": …, "waits": [{"webhook": …, "url": …}]}`) included.
pub fn without_capabilities(waiting_for: &serde_json::Value) -> serde_json::Value {
    let mut seen = waiting_for.clone();
    remove_urls(&mut seen);
    seen
}

fn remove_urls(value: &mut serde_json::Value) {
    match value {
        serde_json::Value::Object(obj) => {
            obj.remove("url");
            obj.values_mut().for_each(remove_urls);
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(remove_urls),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_watcher_sees_no_webhook_url_at_any_depth() {
        let race = serde_json::json!({
            "race": "reply_or_timeout",
            "until": 5,
            "waits": [
                { "webhook": "reply", "url": "https://w.example/webhooks/t/abc", "until": 9 },
                { "sleep": "timeout", "until": 5 },
            ],
        });
        let seen = without_capabilities(&race);
        assert!(!seen.to_string().contains("/webhooks/"), "{seen}");
        assert_eq!(
            seen["waits"][0],
            serde_json::json!({ "webhook": "reply", "until": 9 })
        );
        assert_eq!(seen["waits"][1], race["waits"][1]);
        let single = serde_json::json!({ "webhook": "w", "url": "https://x/webhooks/t/abc" });
        assert_eq!(
            without_capabilities(&single),
            serde_json::json!({ "webhook": "w" })
        );
    }

    #[test]
    fn a_secret_is_removed_as_written_and_as_a_url_carries_it() {
        let secrets = vec!["k3y/with+odd=chars &more".to_owned(), "abc".to_owned()];
        let plain = "failed: k3y/with+odd=chars &more";
        assert_eq!(redact_secrets(plain, &secrets), "failed: [redacted]");
        let upper = "GET https://w.example/weather?appid=k3y%2Fwith%2Bodd%3Dchars%20%26more&q=x";
        assert_eq!(
            redact_secrets(upper, &secrets),
            "GET https://w.example/weather?appid=[redacted]&q=x"
        );
        let lower = "appid=k3y%2fwith%2bodd%3dchars%20%26more";
        assert_eq!(redact_secrets(lower, &secrets), "appid=[redacted]");
        let form = "appid=k3y%2Fwith%2Bodd%3Dchars+%26more";
        assert_eq!(redact_secrets(form, &secrets), "appid=[redacted]");
        // Too short to search for: "abc" stays.
        assert_eq!(redact_secrets("abcdef", &secrets), "abcdef");
        assert!(matches!(
            redact_secrets("clean", &secrets),
            Cow::Borrowed(_)
        ));
    }

    #[test]
    fn a_secret_inside_another_does_not_leave_the_rest_of_the_longer_one() {
        let text = "key=abcd1234-extra, key=abcd1234";
        for secrets in [
            vec!["abcd1234".to_owned(), "abcd1234-extra".to_owned()],
            vec!["abcd1234-extra".to_owned(), "abcd1234".to_owned()],
        ] {
            assert_eq!(
                redact_secrets(text, &secrets),
                "key=[redacted], key=[redacted]"
            );
        }
    }
}
