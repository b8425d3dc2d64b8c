//! Who may do what: the server key, client tokens bound to one thread, and the scope each
//! operation needs.
//!
//! A client token is `et1.<payload>.<signature>` (base64url, no padding): the payload is JSON
//! `{"t": thread, "s": scopes, "e": expiry (s), "g": generation}`, the signature an
//! HMAC-SHA-256 over `et1.<payload>` keyed by `EDGENT_TOKEN_SECRET`, a secret apart from the
//! API key so that a leaked token never helps forge a key. The router checks signature,
//! expiry and thread; the thread checks the generation (revocation), which only it knows.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::Sha256;

use super::{constant_time_eq, ApiError};

/// The secret that signs client tokens.
pub const TOKEN_SECRET: &str = "EDGENT_TOKEN_SECRET";
/// The WebSocket subprotocol a browser offers beside its credential
/// (`new WebSocket(url, ["edgent", token])`); the server answers with it.
pub const SUBPROTOCOL: &str = "edgent";
/// The shortest and longest lifetime a client token may be minted for.
pub const MIN_TOKEN_TTL_S: i64 = 60;
/// Seven days.
pub const MAX_TOKEN_TTL_S: i64 = 7 * 24 * 3600;
/// The lifetime when the request names none.
pub const DEFAULT_TOKEN_TTL_S: i64 = 3600;

const PREFIX: &str = "et1.";

/// What a client token allows beyond reading its thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// Read the thread (summary, messages, tool calls), send user messages, stop, resume.
    Chat,
    /// Approve or reject the thread's calls that wait for approval.
    Approve,
}

impl Scope {
    fn parse(s: &str) -> Option<Scope> {
        match s {
            "chat" => Some(Scope::Chat),
            "approve" => Some(Scope::Approve),
            _ => None,
        }
    }
}

/// What an operation needs of the caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// A client token with `chat` (every token has it) or the server key.
    Chat,
    /// A client token with `approve`, or the server key.
    Approve,
    /// The server key only.
    Server,
}

/// A verified client token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClientToken {
    /// The one thread it reaches.
    #[serde(rename = "t")]
    pub thread_id: String,
    /// Its scopes (`chat` always among them).
    #[serde(rename = "s")]
    pub scopes: Vec<Scope>,
    /// When it stops working, seconds since the epoch.
    #[serde(rename = "e")]
    pub expires_at: i64,
    /// The thread's token generation it was minted in; a revocation raises the thread's.
    #[serde(rename = "g")]
    pub generation: i64,
}

/// Who is calling.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Principal {
    /// The holder of `EDGENT_API_KEY` (or a parent thread, inside the deployment).
    Server,
    /// A browser or app holding a client token.
    Client(ClientToken),
}

impl Principal {
    /// Whether this caller may perform an operation needing `access` on the thread whose
    /// current token generation is `generation`, at `now_s`: `Ok` or the error to answer
    /// (401 for a token revoked or expired since the router saw it, 403 for a scope it lacks).
    pub fn check(&self, access: Access, generation: i64, now_s: i64) -> Result<(), ApiError> {
        let Principal::Client(token) = self else {
            return Ok(());
        };
        if token.generation < generation {
            return Err(ApiError::new(
                401,
                "unauthorized",
                "this token was revoked; ask your server for a new one",
            ));
        }
        if token.expires_at <= now_s {
            return Err(ApiError::new(
                401,
                "unauthorized",
                "this token has expired; ask your server for a new one",
            ));
        }
        let needed = match access {
            Access::Chat => return Ok(()),
            Access::Approve => Scope::Approve,
            Access::Server => {
                return Err(ApiError::new(
                    403,
                    "forbidden",
                    "a client token cannot do this; it needs the server key",
                ))
            }
        };
        if token.scopes.contains(&needed) {
            Ok(())
        } else {
            Err(ApiError::new(
                403,
                "forbidden",
                "this token lacks the \"approve\" scope",
            ))
        }
    }
}

pub use crate::values::redact::without_capabilities;

/// Removes the webhook URLs from a page of tool call records (`{"tool_calls": [...]}`) shown
/// to a client token.
pub fn redact_records(page: &mut Value) {
    let Some(calls) = page.get_mut("tool_calls").and_then(Value::as_array_mut) else {
        return;
    };
    for call in calls {
        if let Some(waiting_for) = call.get_mut("waiting_for") {
            *waiting_for = without_capabilities(waiting_for);
        }
    }
}

/// `POST /api/threads/:id/tokens` body (also the `"token"` member of `POST /api/threads`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MintRequest {
    /// Scopes, `chat` included whether named or not.
    pub scopes: Vec<Scope>,
    /// Lifetime in seconds.
    pub ttl_seconds: i64,
}

impl MintRequest {
    /// Validates the JSON of a mint request.
    pub fn from_value(value: &Value) -> Result<Self, ApiError> {
        let Some(obj) = value.as_object() else {
            return Err(ApiError::invalid(
                "a token request must be an object {\"scopes\": [...], \"ttl_seconds\": n}",
            ));
        };
        if let Some(unknown) = obj.keys().find(|k| *k != "scopes" && *k != "ttl_seconds") {
            return Err(ApiError::invalid(format!(
                "unknown field {unknown:?} in the token request; expected scopes, ttl_seconds"
            )));
        }
        let mut scopes = vec![Scope::Chat];
        match obj.get("scopes") {
            None | Some(Value::Null) => {}
            Some(Value::Array(items)) => {
                for item in items {
                    let scope = item.as_str().and_then(Scope::parse).ok_or_else(|| {
                        ApiError::invalid(format!(
                            "unknown scope {item}; the scopes are \"chat\" and \"approve\""
                        ))
                    })?;
                    if !scopes.contains(&scope) {
                        scopes.push(scope);
                    }
                }
            }
            Some(_) => return Err(ApiError::invalid("\"scopes\" must be an array of strings")),
        }
        scopes.sort();
        let ttl_seconds = match obj.get("ttl_seconds") {
            None | Some(Value::Null) => DEFAULT_TOKEN_TTL_S,
            Some(v) => v
                .as_i64()
                .filter(|t| (MIN_TOKEN_TTL_S..=MAX_TOKEN_TTL_S).contains(t))
                .ok_or_else(|| {
                    ApiError::invalid(format!(
                        "\"ttl_seconds\" must be an integer from {MIN_TOKEN_TTL_S} to \
                         {MAX_TOKEN_TTL_S}"
                    ))
                })?,
        };
        Ok(MintRequest {
            scopes,
            ttl_seconds,
        })
    }

    /// Validates a request body (an empty body asks for the defaults).
    pub fn parse(body: &[u8]) -> Result<Self, ApiError> {
        if body.iter().all(u8::is_ascii_whitespace) {
            return Self::from_value(&Value::Object(Default::default()));
        }
        let value: Value = serde_json::from_slice(body)
            .map_err(|e| ApiError::new(400, "bad_json", format!("body is not valid JSON: {e}")))?;
        Self::from_value(&value)
    }
}

fn mac(secret: &str) -> Result<Hmac<Sha256>, ApiError> {
    if secret.is_empty() {
        return Err(not_configured());
    }
    Hmac::<Sha256>::new_from_slice(secret.as_bytes()).map_err(|_| not_configured())
}

/// `Ok` when `secret` can sign tokens (checked before a thread is created with one, so a
/// missing secret does not leave a thread its caller was not told about).
pub fn signing_ready(secret: Option<&str>) -> Result<(), ApiError> {
    mac(secret.unwrap_or_default()).map(|_| ())
}

fn not_configured() -> ApiError {
    ApiError::new(
        500,
        "not_configured",
        "EDGENT_TOKEN_SECRET is not set on this Worker, so it cannot mint or check client tokens",
    )
}

/// Signs `token` with `secret`: the text a client presents.
pub fn mint(secret: &str, token: &ClientToken) -> Result<String, ApiError> {
    let payload = serde_json::to_vec(token).map_err(|e| ApiError::internal(e.to_string()))?;
    let signed = format!("{PREFIX}{}", URL_SAFE_NO_PAD.encode(payload));
    let mut mac = mac(secret)?;
    mac.update(signed.as_bytes());
    let signature = URL_SAFE_NO_PAD.encode(mac.finalize().into_bytes());
    Ok(format!("{signed}.{signature}"))
}

/// Whether `text` looks like a client token (as opposed to the server key).
pub fn is_client_token(text: &str) -> bool {
    text.starts_with(PREFIX)
}

/// Checks a client token's signature and expiry (not its generation: the thread does).
pub fn verify(secret: &str, text: &str, now_s: i64) -> Result<ClientToken, ApiError> {
    let refused = || ApiError::unauthorized();
    let rest = text.strip_prefix(PREFIX).ok_or_else(refused)?;
    let (payload, signature) = rest.split_once('.').ok_or_else(refused)?;
    let signature = URL_SAFE_NO_PAD.decode(signature).map_err(|_| refused())?;
    let mut mac = mac(secret)?;
    mac.update(&text.as_bytes()[..PREFIX.len() + payload.len()]);
    // `verify_slice` compares in constant time.
    mac.verify_slice(&signature).map_err(|_| refused())?;
    let payload = URL_SAFE_NO_PAD.decode(payload).map_err(|_| refused())?;
    let token: ClientToken = serde_json::from_slice(&payload).map_err(|_| refused())?;
    if token.expires_at <= now_s {
        return Err(ApiError::new(
            401,
            "unauthorized",
            "this token has expired; ask your server for a new one",
        ));
    }
    Ok(token)
}

/// The credential a request presents: the `Authorization: Bearer` header, else the entry of
/// `Sec-WebSocket-Protocol` that is not [`SUBPROTOCOL`] (browsers cannot set headers on a
/// WebSocket), else `?token=` where the route allows it. `None` when there is none.
pub fn presented<'a>(
    authorization: Option<&'a str>,
    subprotocols: Option<&'a str>,
    query_token: Option<&'a str>,
) -> Option<&'a str> {
    let bearer = authorization
        .and_then(|h| {
            h.strip_prefix("Bearer ")
                .or_else(|| h.strip_prefix("bearer "))
        })
        .map(str::trim)
        .filter(|t| !t.is_empty());
    let offered = subprotocols.and_then(|list| {
        list.split(',')
            .map(str::trim)
            .find(|p| !p.is_empty() && *p != SUBPROTOCOL)
    });
    bearer.or(offered).or(query_token.filter(|t| !t.is_empty()))
}

/// Whether the client offered [`SUBPROTOCOL`] (the upgrade must then answer with it).
pub fn offers_subprotocol(subprotocols: Option<&str>) -> bool {
    subprotocols.is_some_and(|list| list.split(',').any(|p| p.trim() == SUBPROTOCOL))
}

/// Who presents `credential`: the server key (compared in constant time) or a valid client
/// token. 401 for anything else.
pub fn authenticate(
    api_key: &str,
    token_secret: Option<&str>,
    credential: Option<&str>,
    now_s: i64,
) -> Result<Principal, ApiError> {
    let Some(credential) = credential else {
        return Err(ApiError::unauthorized());
    };
    if is_client_token(credential) {
        let secret = token_secret.unwrap_or_default();
        return verify(secret, credential, now_s).map(Principal::Client);
    }
    if !api_key.is_empty() && constant_time_eq(credential.as_bytes(), api_key.as_bytes()) {
        Ok(Principal::Server)
    } else {
        Err(ApiError::unauthorized())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use serde_json::json;

    const SECRET: &str = "s3cret-for-tests";

    fn token(scopes: &[Scope], expires_at: i64, generation: i64) -> ClientToken {
        ClientToken {
            thread_id: "t1".into(),
            scopes: scopes.to_vec(),
            expires_at,
            generation,
        }
    }

    #[test]
    fn a_minted_token_verifies_and_a_changed_one_does_not() {
        let t = token(&[Scope::Chat], 1_000, 0);
        let text = mint(SECRET, &t).unwrap();
        assert!(is_client_token(&text));
        assert_eq!(verify(SECRET, &text, 999).unwrap(), t);
        assert_eq!(verify("other", &text, 999).unwrap_err().status, 401);
        assert_eq!(verify(SECRET, &text, 1_000).unwrap_err().status, 401);
        // Forged: the payload of a token with more scopes under the old signature.
        let wider = mint(SECRET, &token(&[Scope::Chat, Scope::Approve], 1_000, 0)).unwrap();
        let (_, sig) = text.rsplit_once('.').unwrap();
        let (body, _) = wider.rsplit_once('.').unwrap();
        assert_eq!(
            verify(SECRET, &format!("{body}.{sig}"), 999)
                .unwrap_err()
                .status,
            401
        );
        for junk in ["et1.", "et1..", "et1.x.y", "et1.!!.??", "nope"] {
            assert_eq!(verify(SECRET, junk, 0).unwrap_err().status, 401, "{junk}");
        }
        assert_eq!(verify("", &text, 0).unwrap_err().code, "not_configured");
    }

    #[test]
    fn scopes_generation_and_expiry_decide_each_operation() {
        let chat = Principal::Client(token(&[Scope::Chat], 100, 2));
        let approve = Principal::Client(token(&[Scope::Chat, Scope::Approve], 100, 2));
        assert!(chat.check(Access::Chat, 2, 50).is_ok());
        assert_eq!(chat.check(Access::Approve, 2, 50).unwrap_err().status, 403);
        assert!(approve.check(Access::Approve, 2, 50).is_ok());
        assert_eq!(
            approve.check(Access::Server, 2, 50).unwrap_err().status,
            403
        );
        assert_eq!(chat.check(Access::Chat, 3, 50).unwrap_err().status, 401);
        assert_eq!(chat.check(Access::Chat, 2, 100).unwrap_err().status, 401);
        assert!(Principal::Server.check(Access::Server, 9, 0).is_ok());
    }

    #[test]
    fn the_credential_comes_from_the_header_the_subprotocol_or_the_query() {
        assert_eq!(
            presented(Some("Bearer k"), Some("edgent, t"), Some("q")),
            Some("k")
        );
        assert_eq!(presented(None, Some("edgent, t"), Some("q")), Some("t"));
        assert_eq!(presented(None, Some("edgent"), Some("q")), Some("q"));
        assert_eq!(presented(Some("Basic x"), None, None), None);
        assert!(offers_subprotocol(Some("x, edgent")));
        assert!(!offers_subprotocol(Some("edgent2")));
        let key = authenticate("key", Some(SECRET), Some("key"), 0).unwrap();
        assert_eq!(key, Principal::Server);
        assert_eq!(
            authenticate("key", Some(SECRET), Some("kez"), 0)
                .unwrap_err()
                .status,
            401
        );
        assert_eq!(authenticate("", None, Some(""), 0).unwrap_err().status, 401);
        let text = mint(SECRET, &token(&[Scope::Chat], 10, 0)).unwrap();
        assert!(matches!(
            authenticate("key", Some(SECRET), Some(&text), 5),
            Ok(Principal::Client(_))
        ));
        // Without the secret no token is accepted.
        assert_eq!(
            authenticate("key", None, Some(&text), 5)
                .unwrap_err()
                .status,
            500
        );
    }

    #[test]
    fn watchers_never_see_a_webhook_url() {
        let detail = json!({"webhook": "callback", "url": "https://x/webhooks/t/abc", "until": 5});
        assert_eq!(
            without_capabilities(&detail),
            json!({"webhook": "callback", "until": 5})
        );
        let mut page = json!({"tool_calls": [{"id": "c1", "waiting_for": detail}, {"id": "c2"}]});
        redact_records(&mut page);
        assert!(!page.to_string().contains("/webhooks/"), "{page}");
        assert_eq!(page["tool_calls"][1], json!({"id": "c2"}));
    }

    #[test]
    fn mint_requests_are_validated() {
        let r = MintRequest::parse(br#"{"scopes":["approve"],"ttl_seconds":120}"#).unwrap();
        assert_eq!(r.scopes, vec![Scope::Chat, Scope::Approve]);
        assert_eq!(r.ttl_seconds, 120);
        assert_eq!(MintRequest::parse(b"").unwrap().ttl_seconds, 3600);
        for bad in [
            json!({"scopes":["admin"]}),
            json!({"scopes":"chat"}),
            json!({"ttl_seconds":59}),
            json!({"ttl_seconds":MAX_TOKEN_TTL_S + 1}),
            json!({"ttl_seconds":"60"}),
            json!({"thread":"x"}),
            json!([1]),
        ] {
            assert_eq!(
                MintRequest::from_value(&bad).unwrap_err().status,
                400,
                "{bad}"
            );
        }
    }
}
