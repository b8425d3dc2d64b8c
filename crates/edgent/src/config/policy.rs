//! What the operator lets model definitions name: which Worker secrets may be sent as a
//! model's key, and to which hosts.
//!
//! A model row is editable through the configuration API, and at call time the Worker sends
//! the named secret to the row's `base_url` with the whole conversation. Without a policy,
//! whoever can edit models could send any secret (the server key included) to any host. The
//! operator's Worker vars decide instead; the rules are checked when a definition is written
//! (the API answers 400) and again before every model call (rows seeded or written into D1
//! directly, or a policy tightened later), so a refused model makes no network attempt.

use crate::config::mcp_servers::McpServerConfig;
use crate::config::{ModelConfig, Provider};
use crate::values::Invalid;

/// Var listing the secrets models may name (comma-separated), replacing [`DEFAULT_SECRETS`].
pub const SECRETS_VAR: &str = "MODEL_SECRETS";
/// Var listing the hosts models may call (comma-separated); unset: any `https` host.
pub const HOSTS_VAR: &str = "MODEL_HOSTS";
/// Var that, set to `1`, lets a model use plain `http` to a loopback host (local development
/// and tests: `npm run dev` writes it to `.dev.vars`).
pub const LOOPBACK_HTTP_VAR: &str = "EDGENT_ALLOW_HTTP_MODELS";
/// Var listing the secrets MCP servers' tokens may come from (comma-separated; unset: none).
pub const MCP_SECRETS_VAR: &str = "MCP_SECRETS";
/// Var listing the hosts MCP servers may be on (comma-separated); unset: any `https` host.
pub const MCP_HOSTS_VAR: &str = "MCP_HOSTS";
/// The secrets models may name when the operator sets no [`SECRETS_VAR`].
pub const DEFAULT_SECRETS: &[&str] = &["OPENAI_API_KEY", "ANTHROPIC_API_KEY"];
/// Secrets no model may name, whatever the vars say: the server key and the client-token
/// signing secret.
pub const NEVER_SENT: &[&str] = &["EDGENT_API_KEY", "EDGENT_TOKEN_SECRET"];

/// The operator's rules for model definitions, read from the Worker's vars.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelPolicy {
    secrets: Vec<String>,
    hosts: Option<Vec<String>>,
    loopback_http: bool,
    mcp_secrets: Vec<String>,
    mcp_hosts: Option<Vec<String>>,
}

impl Default for ModelPolicy {
    /// No vars set: the default secrets, any `https` host, no plain `http`.
    fn default() -> Self {
        ModelPolicy::from_vars(|_| None)
    }
}

/// A comma-separated list, trimmed, empty entries dropped.
fn list(value: &str) -> Vec<String> {
    value
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

impl ModelPolicy {
    /// The policy the vars describe (`var` answers a var's value, `None` when unset).
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Self {
        let secrets = match var(SECRETS_VAR) {
            Some(v) => list(&v),
            None => DEFAULT_SECRETS.iter().map(|s| (*s).to_owned()).collect(),
        };
        let hosts_of = |name: &str| {
            var(name).map(|v| {
                list(&v)
                    .into_iter()
                    .map(|h| h.to_ascii_lowercase())
                    .collect()
            })
        };
        ModelPolicy {
            secrets,
            hosts: hosts_of(HOSTS_VAR),
            loopback_http: var(LOOPBACK_HTTP_VAR).as_deref() == Some("1"),
            mcp_secrets: var(MCP_SECRETS_VAR).map(|v| list(&v)).unwrap_or_default(),
            mcp_hosts: hosts_of(MCP_HOSTS_VAR),
        }
    }

    /// Whether an MCP server of a prompt keeps to the policy: its token's secret is one the
    /// operator lists in [`MCP_SECRETS_VAR`] (none by default, and never the model keys' list:
    /// a model key is not sent to a tool server), its URL is `https` (plain `http` to a
    /// loopback host with the dev var) on a host of [`MCP_HOSTS_VAR`] when that is set.
    pub fn check_mcp_server(&self, server: &McpServerConfig) -> Result<(), Invalid> {
        let what = format!("mcp server {:?}", server.name);
        if let Some(secret) = &server.token_secret {
            // Never the server's secrets, and never a model's key, whatever MCP_SECRETS says.
            let refused = NEVER_SENT.contains(&secret.as_str())
                || self.secrets.contains(secret)
                || DEFAULT_SECRETS.contains(&secret.as_str());
            if refused || !self.mcp_secrets.contains(secret) {
                return Err(format!(
                    "{what}: \"token_secret\" names {secret:?}, which the operator has not allowed \
                     for MCP servers (the Worker var {MCP_SECRETS_VAR} lists them: {})",
                    if self.mcp_secrets.is_empty() {
                        "none".to_owned()
                    } else {
                        self.mcp_secrets.join(", ")
                    }
                )
                .into());
            }
        }
        self.check_url(
            &what,
            "url",
            &server.url,
            self.mcp_hosts.as_deref(),
            MCP_HOSTS_VAR,
        )
    }

    /// Whether `model` keeps to the policy; the error says what the operator must allow.
    pub fn check(&self, model: &ModelConfig) -> Result<(), Invalid> {
        if let Some(secret) = &model.api_key_secret {
            if NEVER_SENT.contains(&secret.as_str()) {
                return Err(format!(
                    "\"api_key_secret\" names {secret:?}, which is never sent to a model"
                )
                .into());
            }
            if !self.secrets.iter().any(|s| s == secret) {
                return Err(format!(
                    "\"api_key_secret\" names {secret:?}, which the operator has not allowed \
                     for models (allowed: {}; the Worker var {SECRETS_VAR} lists them)",
                    if self.secrets.is_empty() {
                        "none".to_owned()
                    } else {
                        self.secrets.join(", ")
                    }
                )
                .into());
            }
        }
        if model.provider == Provider::WorkersAi {
            return Ok(());
        }
        self.check_url(
            "",
            "base_url",
            &model.base_url,
            self.hosts.as_deref(),
            HOSTS_VAR,
        )
    }

    /// The URL rules of a model's `base_url` and an MCP server's `url`: `https` (plain
    /// `http` only to a loopback host with the dev var), no credentials, on an allowed host
    /// when the operator lists hosts (`hosts_var`). `what` prefixes the message.
    fn check_url(
        &self,
        what: &str,
        field: &str,
        url: &str,
        hosts: Option<&[String]>,
        hosts_var: &str,
    ) -> Result<(), Invalid> {
        let what = if what.is_empty() {
            String::new()
        } else {
            format!("{what}: ")
        };
        let (scheme, host) = scheme_and_host(url).ok_or_else(|| {
            Invalid::from(format!(
                "{what}\"{field}\" {url:?} is not an http(s) URL with a host (and no user or password)"
            ))
        })?;
        match scheme {
            "https" => {}
            "http" if self.loopback_http && is_loopback(&host) => {}
            "http" if is_loopback(&host) => {
                return Err(format!(
                    "{what}\"{field}\" must use https (plain http to {host} needs the dev var \
                     {LOOPBACK_HTTP_VAR}=1)"
                )
                .into())
            }
            _ => return Err(format!("{what}\"{field}\" must use https").into()),
        }
        if let Some(hosts) = hosts {
            let local = self.loopback_http && is_loopback(&host);
            if !local && !hosts.contains(&host) {
                return Err(format!(
                    "{what}\"{field}\" host {host:?} is not one the operator allows (the Worker var \
                     {hosts_var} lists them: {})",
                    hosts.join(", ")
                )
                .into());
            }
        }
        Ok(())
    }
}

/// The scheme and the lower-cased host (no port) of an absolute http(s) URL; `None` for
/// anything else, or a URL carrying credentials (`user:pass@`), which a key would leak
/// through.
fn scheme_and_host(url: &str) -> Option<(&'static str, String)> {
    let (scheme, rest) = if let Some(rest) = url.strip_prefix("https://") {
        ("https", rest)
    } else if let Some(rest) = url.strip_prefix("http://") {
        ("http", rest)
    } else {
        return None;
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    if authority.contains('@') || authority.contains('\\') {
        return None;
    }
    let host = if let Some(v6) = authority.strip_prefix('[') {
        format!("[{}]", v6.split(']').next()?)
    } else {
        authority.split(':').next().unwrap_or_default().to_owned()
    };
    (!host.is_empty() && host != "[]").then(|| (scheme, host.to_ascii_lowercase()))
}

/// `localhost`, `127.x.x.x` or `[::1]`.
fn is_loopback(host: &str) -> bool {
    host == "localhost"
        || host == "[::1]"
        || host.strip_prefix("127.").is_some_and(|r| {
            r.split('.').all(|p| p.parse::<u8>().is_ok()) && r.split('.').count() == 3
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model(base_url: &str, secret: Option<&str>) -> ModelConfig {
        serde_json::from_value(serde_json::json!({
            "name": "m", "provider": "openai", "model": "x", "base_url": base_url,
            "api_key_secret": secret,
        }))
        .expect("model")
    }

    fn vars(pairs: &[(&str, &str)]) -> ModelPolicy {
        let pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        ModelPolicy::from_vars(|k| pairs.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone()))
    }

    #[test]
    fn secrets_come_from_the_allow_list_and_the_server_key_never() {
        let default = ModelPolicy::default();
        assert!(default
            .check(&model("https://api.openai.com/v1", Some("OPENAI_API_KEY")))
            .is_ok());
        assert!(default
            .check(&model("https://api.openai.com/v1", None))
            .is_ok());
        let e = default
            .check(&model("https://api.openai.com/v1", Some("WEATHER_API_KEY")))
            .unwrap_err();
        assert!(e.to_string().contains("MODEL_SECRETS"), "{e}");
        let listed = vars(&[("MODEL_SECRETS", "EDGENT_API_KEY, GROQ_KEY")]);
        assert!(listed
            .check(&model("https://x.dev/v1", Some("GROQ_KEY")))
            .is_ok());
        assert!(listed
            .check(&model("https://x.dev/v1", Some("OPENAI_API_KEY")))
            .is_err());
        for never in NEVER_SENT {
            let e = listed
                .check(&model("https://x.dev/v1", Some(never)))
                .unwrap_err();
            assert!(e.to_string().contains("never sent"), "{e}");
        }
    }

    #[test]
    fn base_urls_are_https_or_allowed_loopback_http() {
        let default = ModelPolicy::default();
        for bad in [
            "http://api.openai.com/v1",
            "http://127.0.0.1:9100/v1",
            "ftp://x/v1",
            "https://user:pw@api.openai.com/v1",
            "https://@evil.example/v1",
            "https:///v1",
            "api.openai.com/v1",
        ] {
            assert!(default.check(&model(bad, None)).is_err(), "{bad}");
        }
        let dev = vars(&[("EDGENT_ALLOW_HTTP_MODELS", "1")]);
        for ok in [
            "http://127.0.0.1:9100/v1",
            "http://localhost/v1",
            "http://[::1]:8080/v1",
        ] {
            assert!(
                dev.check(&model(ok, Some("OPENAI_API_KEY"))).is_ok(),
                "{ok}"
            );
        }
        for bad in [
            "http://127.0.0.1.evil.example/v1",
            "http://10.0.0.1/v1",
            "http://localhost.evil/v1",
        ] {
            assert!(dev.check(&model(bad, None)).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_host_allow_list_limits_where_keys_go() {
        let p = vars(&[("MODEL_HOSTS", "api.openai.com, API.anthropic.com")]);
        assert!(p
            .check(&model("https://API.OpenAI.com:443/v1", None))
            .is_ok());
        assert!(p
            .check(&model("https://api.anthropic.com/v1", None))
            .is_ok());
        let e = p
            .check(&model("https://api.openai.com.evil.example/v1", None))
            .unwrap_err();
        assert!(e.to_string().contains("MODEL_HOSTS"), "{e}");
    }

    #[test]
    fn workers_ai_needs_no_url() {
        let mut m = model("", None);
        m.provider = Provider::WorkersAi;
        assert!(ModelPolicy::default().check(&m).is_ok());
    }

    #[test]
    fn mcp_servers_get_only_the_secrets_and_hosts_listed_for_them() {
        let server = |url: &str, secret: Option<&str>| McpServerConfig {
            name: "kb".into(),
            url: url.into(),
            token_secret: secret.map(str::to_owned),
            tools: Vec::new(),
            approval: Vec::new(),
        };
        let none = ModelPolicy::default();
        assert!(none
            .check_mcp_server(&server("https://kb.example/mcp", None))
            .is_ok());
        let refused = none
            .check_mcp_server(&server("https://kb.example/mcp", Some("KB_TOKEN")))
            .unwrap_err();
        assert!(refused.to_string().contains("MCP_SECRETS"), "{refused}");
        // The models' secrets are not the MCP servers': a model key never goes to a tool server.
        assert!(none
            .check_mcp_server(&server("https://kb.example/mcp", Some("OPENAI_API_KEY")))
            .is_err());
        let p = vars(&[
            ("MCP_SECRETS", "KB_TOKEN, EDGENT_API_KEY"),
            ("MCP_HOSTS", "kb.example"),
        ]);
        assert!(p
            .check_mcp_server(&server("https://KB.example/mcp", Some("KB_TOKEN")))
            .is_ok());
        assert!(
            p.check_mcp_server(&server("https://kb.example/mcp", Some("EDGENT_API_KEY")))
                .is_err(),
            "never the server key, whatever the vars say"
        );
        let both = vars(&[("MCP_SECRETS", "OPENAI_API_KEY,KB_TOKEN")]);
        assert!(
            both.check_mcp_server(&server("https://kb.example/mcp", Some("OPENAI_API_KEY")))
                .is_err(),
            "a model key never goes to a tool server, even when listed"
        );
        let host = p
            .check_mcp_server(&server("https://other.example/mcp", None))
            .unwrap_err();
        assert!(host.to_string().contains("MCP_HOSTS"), "{host}");
        assert!(p
            .check_mcp_server(&server("http://kb.example/mcp", None))
            .is_err());
        assert!(p
            .check_mcp_server(&server("https://user:pw@kb.example/mcp", None))
            .is_err());
        let dev = vars(&[("EDGENT_ALLOW_HTTP_MODELS", "1")]);
        assert!(dev
            .check_mcp_server(&server("http://127.0.0.1:9/mcp", None))
            .is_ok());
    }
}
