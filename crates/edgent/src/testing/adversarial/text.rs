//! Text the framework rewrites: `{{key}}` templates and secret redaction.

use serde_json::{Map, Value};

use super::input::{any_value, Input};
use crate::config::render_template;
use crate::tool::HttpRequest;
use crate::values::redact::{redact_secrets, REDACTED};

/// Pieces templates are made of.
const TEMPLATE_PIECES: &[&str] = &[
    "{{",
    "}}",
    "{",
    "}",
    " ",
    "name",
    "tier",
    "é",
    "{{ name }}",
    "{{name}}",
    "{{}}",
    "}}{{",
    "\u{1F600}",
    "$",
    "\n",
];

/// Input: the context's values (for the keys `name`, `tier` and one of any text), then the
/// template's pieces (mostly braces and keys) or raw text.
///
/// Rendering never panics; a template without `{{` renders as written; with an empty context
/// every template renders as written (unknown keys stay visible); a template of the
/// placeholders alone renders as the values it names.
pub fn template(data: &[u8]) {
    let mut input = Input::new(data);
    let mut context = Map::new();
    for key in ["name".to_owned(), "tier".to_owned(), input.text(6)] {
        if input.bool() {
            context.insert(key, any_value(&mut input, 1));
        }
    }
    let mut text = String::new();
    while !input.is_empty() && text.len() < 4096 {
        if input.one_in(4) {
            text.push_str(&input.text(16));
        } else {
            text.push_str(input.pick(TEMPLATE_PIECES).unwrap_or_default());
        }
    }
    let rendered = render_template(&text, &context);
    if !text.contains("{{") {
        assert_eq!(rendered, text, "a template without placeholders changed");
    }
    assert_eq!(
        render_template(&text, &Map::new()),
        text,
        "no context, no change"
    );
    if let Some(Value::String(name)) = context.get("name") {
        assert_eq!(
            render_template("{{name}}{{ name }}", &context),
            format!("{name}{name}")
        );
    }
}

/// The forms a secret travels in: as written, percent-encoded as the framework's own query
/// builder writes it ([`HttpRequest::query`], upper-case hex), in lower-case hex, and form
/// encoded (a space as `+`).
fn forms(secret: &str) -> Vec<String> {
    let url = HttpRequest::get("https://x.test/").query("k", secret).url;
    let upper = url
        .split_once("?k=")
        .map(|(_, v)| v.to_owned())
        .unwrap_or_default();
    let mut lower = String::with_capacity(upper.len());
    let mut hex = 0;
    for c in upper.chars() {
        if c == '%' {
            hex = 2;
            lower.push(c);
        } else if hex > 0 {
            hex -= 1;
            lower.push(c.to_ascii_lowercase());
        } else {
            lower.push(c);
        }
    }
    let form = upper.replace("%20", "+");
    vec![secret.to_owned(), upper, lower, form]
}

/// Characters secrets are made of: a key's alphabet, the characters URLs encode, and the
/// characters of the redaction marker.
const SECRET_CHARS: &[char] = &[
    'a', 'b', 'k', 'Z', '0', '9', '-', '_', '.', '~', '/', '+', '=', '%', ' ', '&', '?', 'é', '[',
    ']', 'r', 'e', 'd',
];

fn secret_chars(input: &mut Input<'_>, n: usize) -> String {
    (0..n)
        .map(|_| input.pick(SECRET_CHARS).unwrap_or('a'))
        .collect()
}

/// Input: the secret's length (4 to 67 characters) and characters, a second secret (any
/// characters, or one inside the first or around it), then the text: pieces of arbitrary text
/// with either secret dropped in between in any of its forms.
///
/// Neither secret, in any of its forms (as written, percent-encoded with upper- or lower-case
/// hex, form encoded), survives redaction anywhere in the text, and the order the secrets are
/// given in does not matter (one inside the other used to leave the outer one's rest when the
/// inner one was redacted first). The marker itself may border a secret's own characters (a
/// secret `d]ab` before `ab` leaves `[redacte` + `d]ab`), so the check is made on the text
/// between markers.
pub fn redaction(data: &[u8]) {
    let mut input = Input::new(data);
    let n = 4 + input.below(64);
    let secret = secret_chars(&mut input, n);
    let other = match input.below(4) {
        0 => {
            let n = input.below(12);
            secret_chars(&mut input, n)
        }
        1 => {
            let chars: Vec<char> = secret.chars().collect();
            let start = input.below(chars.len());
            let len = 4 + input.below(chars.len());
            chars[start..(start + len).min(chars.len())]
                .iter()
                .collect()
        }
        _ => {
            let n = 1 + input.below(8);
            let extra = secret_chars(&mut input, n);
            if input.bool() {
                format!("{extra}{secret}")
            } else {
                format!("{secret}{extra}")
            }
        }
    };
    let forms_of = [forms(&secret), forms(&other)];
    let mut text = String::new();
    while !input.is_empty() && text.len() < 8192 {
        match input.below(4) {
            0 => text.push_str(&input.text(24)),
            which => {
                let all = &forms_of[usize::from(which == 1)];
                let i = input.below(all.len());
                text.push_str(&all[i]);
            }
        }
    }
    let out = redact_secrets(&text, &[secret.clone(), other.clone()]);
    let reversed = redact_secrets(&text, &[other.clone(), secret.clone()]);
    assert_eq!(
        out, reversed,
        "the order of {secret:?} and {other:?} matters for {text:?}"
    );
    for (s, all) in [&secret, &other].into_iter().zip(&forms_of) {
        if s.len() < 4 {
            continue; // too short to search for: it would match ordinary text
        }
        for piece in out.split(REDACTED) {
            for form in all {
                assert!(
                    !piece.contains(form.as_str()),
                    "secret {s:?} survives as {form:?} in {out:?} (from {text:?})"
                );
            }
        }
    }
}
