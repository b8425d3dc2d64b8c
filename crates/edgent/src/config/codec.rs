//! The D1 row codec of the configuration: the three kinds of definition, their columns, and
//! how a definition becomes a row and a row (or an API body) becomes a definition.

use serde_json::Value;

use crate::config::{rows, AgentDef, ModelConfig, PromptConfig};
use crate::values::error::ApiError;
use crate::values::sql::SqlValue;
use crate::values::Invalid;

/// The three kinds of definition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A `models` row.
    Model,
    /// A `prompts` row.
    Prompt,
    /// An `agents` row.
    Agent,
}

/// Every kind, in the order writes must run: prompts reference models (a D1 foreign key) and
/// agents reference prompts.
pub const KINDS: [Kind; 3] = [Kind::Model, Kind::Prompt, Kind::Agent];

/// `models` columns written by the API, in bind order (`updated_at` follows).
pub const MODEL_COLUMNS: &[&str] = &[
    "name",
    "provider",
    "model",
    "base_url",
    "api_key_secret",
    "fallbacks",
    "input_price_per_mtok",
    "output_price_per_mtok",
    "first_chunk_timeout_ms",
    "stall_timeout_ms",
    "total_timeout_ms",
    "max_history_tokens",
    "max_output_tokens",
];

/// `prompts` columns written by the API, in bind order (`updated_at` follows).
pub const PROMPT_COLUMNS: &[&str] = &[
    "name",
    "system",
    "model",
    "tools",
    "tool_choice",
    "parallel_tool_calls",
    "include_chat",
    "description",
    "hooks",
    "tool_bindings",
    "mcp_servers",
    "compaction_prompt",
    "response_format",
    "max_offered_tools",
    "pinned_tools",
    "tool_selection_model",
];

/// `agents` columns written by the API, in bind order (`updated_at` follows).
pub const AGENT_COLUMNS: &[&str] = &[
    "id",
    "kind",
    "description",
    "side_a",
    "side_b",
    "max_turns",
    "expose_as_tool",
    "tool_description",
    "hooks",
    "max_tokens",
    "max_cost_usd",
];

impl Kind {
    /// The kind a URL segment (`models`, `prompts`, `agents`) names.
    pub fn from_plural(segment: &str) -> Option<Kind> {
        KINDS.into_iter().find(|k| k.plural() == segment)
    }

    /// The URL segment, the table name and the key in `PUT /api/config` bodies (all the same).
    pub fn plural(self) -> &'static str {
        match self {
            Kind::Model => "models",
            Kind::Prompt => "prompts",
            Kind::Agent => "agents",
        }
    }

    /// The word used in messages.
    pub fn singular(self) -> &'static str {
        match self {
            Kind::Model => "model",
            Kind::Prompt => "prompt",
            Kind::Agent => "agent",
        }
    }

    /// The D1 table.
    pub fn table(self) -> &'static str {
        self.plural()
    }

    /// The primary-key column, which is also the field naming a definition.
    pub fn key(self) -> &'static str {
        match self {
            Kind::Model | Kind::Prompt => "name",
            Kind::Agent => "id",
        }
    }

    /// The columns written, in bind order.
    pub fn columns(self) -> &'static [&'static str] {
        match self {
            Kind::Model => MODEL_COLUMNS,
            Kind::Prompt => PROMPT_COLUMNS,
            Kind::Agent => AGENT_COLUMNS,
        }
    }

    /// Every row, ordered by name.
    pub fn select_all_sql(self) -> String {
        format!("SELECT * FROM {} ORDER BY {}", self.table(), self.key())
    }

    /// One row; binds the name as `?1`.
    pub fn select_one_sql(self) -> String {
        format!("SELECT * FROM {} WHERE {} = ?1", self.table(), self.key())
    }

    /// Deletes one row; binds the name as `?1`.
    pub fn delete_sql(self) -> String {
        format!("DELETE FROM {} WHERE {} = ?1", self.table(), self.key())
    }

    /// Inserts or replaces one row; binds [`Definition::row`] (the columns, then `updated_at`).
    /// Running it twice with the same values leaves the same row, which makes seeding idempotent.
    pub fn upsert_sql(self) -> String {
        let cols = self.columns();
        let placeholders: Vec<String> = (1..=cols.len() + 1).map(|i| format!("?{i}")).collect();
        let updates: Vec<String> = cols
            .iter()
            .filter(|c| **c != self.key())
            .chain(std::iter::once(&"updated_at"))
            .map(|c| format!("{c} = excluded.{c}"))
            .collect();
        format!(
            "INSERT INTO {} ({}, updated_at) VALUES ({}) ON CONFLICT ({}) DO UPDATE SET {}",
            self.table(),
            cols.join(", "),
            placeholders.join(", "),
            self.key(),
            updates.join(", ")
        )
    }
}

/// One definition of any kind.
#[derive(Debug, Clone, PartialEq)]
pub enum Definition {
    /// A model.
    Model(ModelConfig),
    /// A prompt.
    Prompt(PromptConfig),
    /// An agent.
    Agent(AgentDef),
}

/// A 400 for a definition that breaks a rule; the message names the definition and the field.
pub fn invalid(message: impl Into<String>) -> ApiError {
    ApiError::new(400, "invalid_definition", message)
}

pub(super) fn bad_json(e: &serde_json::Error) -> ApiError {
    ApiError::new(400, "bad_json", format!("body is not valid JSON: {e}"))
}

impl Definition {
    /// Its kind.
    pub fn kind(&self) -> Kind {
        match self {
            Definition::Model(_) => Kind::Model,
            Definition::Prompt(_) => Kind::Prompt,
            Definition::Agent(_) => Kind::Agent,
        }
    }

    /// Its name (an agent's id).
    pub fn name(&self) -> &str {
        match self {
            Definition::Model(m) => &m.name,
            Definition::Prompt(p) => &p.name,
            Definition::Agent(a) => &a.id,
        }
    }

    /// `model "default"`, for messages.
    pub fn label(&self) -> String {
        format!("{} {:?}", self.kind().singular(), self.name())
    }

    /// The rules that need no other definition.
    pub fn check(&self) -> Result<(), Invalid> {
        match self {
            Definition::Model(m) => m.check(),
            Definition::Prompt(p) => p.check(),
            Definition::Agent(a) => a.check(),
        }
    }

    /// The definition as the API shows it (every field, defaults filled in).
    pub fn to_json(&self) -> Value {
        let value = match self {
            Definition::Model(m) => serde_json::to_value(m),
            Definition::Prompt(p) => serde_json::to_value(p),
            Definition::Agent(a) => serde_json::to_value(a),
        };
        // These types are plain data with string keys; serialising them cannot fail.
        value.unwrap_or(Value::Null)
    }

    /// Reads a D1 row of `kind` (with the engine's reader).
    pub fn from_row(kind: Kind, row: Value) -> Result<Definition, Invalid> {
        Ok(match kind {
            Kind::Model => Definition::Model(rows::model(row)?),
            Kind::Prompt => Definition::Prompt(rows::prompt(row)?),
            Kind::Agent => Definition::Agent(rows::agent(row)?),
        })
    }

    /// Parses a definition given as JSON (`serde`, unknown fields refused).
    pub fn from_json(kind: Kind, value: Value) -> Result<Definition, Invalid> {
        use crate::values::validate::parse_args;
        Ok(match kind {
            Kind::Model => Definition::Model(parse_args(value)?),
            Kind::Prompt => Definition::Prompt(parse_args(value)?),
            Kind::Agent => Definition::Agent(parse_args(value)?),
        })
    }

    /// Parses the body of `PUT /api/{kind}/{url_name}`. The body's name (`id` for agents) must
    /// equal the URL's or be left out, in which case the URL's is used.
    pub fn parse_put(kind: Kind, body: &[u8], url_name: &str) -> Result<Definition, ApiError> {
        let value: Value = serde_json::from_slice(body).map_err(|e| bad_json(&e))?;
        let Value::Object(mut fields) = value else {
            return Err(ApiError::new(400, "bad_json", "body must be a JSON object"));
        };
        match fields.get(kind.key()) {
            None | Some(Value::Null) => {
                fields.insert(kind.key().to_owned(), Value::from(url_name));
            }
            Some(Value::String(s)) if s != url_name => {
                return Err(invalid(format!(
                    "\"{}\" is {s:?} but the URL names {} {url_name:?}; they must match (or leave \"{}\" out)",
                    kind.key(),
                    kind.singular(),
                    kind.key()
                )));
            }
            // The URL's name, or a non-string that serde reports below.
            Some(_) => {}
        }
        Definition::from_json(kind, Value::Object(fields))
            .map_err(|why| invalid(format!("{} {url_name:?}: {why}", kind.singular())))
    }

    /// The values bound to [`Kind::upsert_sql`]: the columns of [`Kind::columns`] in order,
    /// then `updated_at`. Lists and side objects are JSON text, booleans 0/1, unset options NULL.
    pub fn row(&self, updated_at: i64) -> Result<Vec<SqlValue>, RowError> {
        let kind = self.kind();
        let Value::Object(fields) = self.to_json() else {
            return Err(RowError::NotAnObject {
                label: self.label(),
            });
        };
        // A field the table has no column for would be silently dropped; refuse instead.
        if let Some(extra) = fields
            .keys()
            .find(|k| !kind.columns().contains(&k.as_str()))
        {
            return Err(RowError::NoColumn {
                label: self.label(),
                field: extra.clone(),
                table: kind.table(),
            });
        }
        let mut out = Vec::with_capacity(kind.columns().len() + 1);
        for col in kind.columns() {
            let value = fields.get(*col).ok_or_else(|| RowError::NoField {
                label: self.label(),
                column: col,
            })?;
            out.push(column_value(value));
        }
        out.push(SqlValue::Integer(updated_at));
        Ok(out)
    }
}

/// Why a definition cannot be written as a row: its fields and its table's columns disagree.
/// A fault of this codec (a field added without its column), never of the definition's values.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum RowError {
    /// The definition did not serialise to a JSON object.
    NotAnObject {
        /// The definition (`model "default"`).
        label: String,
    },
    /// A field the table has no column for (it would be silently dropped).
    NoColumn {
        /// The definition.
        label: String,
        /// The field.
        field: String,
        /// The table.
        table: &'static str,
    },
    /// A column the definition has no field for.
    NoField {
        /// The definition.
        label: String,
        /// The column.
        column: &'static str,
    },
}

impl std::fmt::Display for RowError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RowError::NotAnObject { label } => write!(f, "{label} did not serialise to an object"),
            RowError::NoColumn {
                label,
                field,
                table,
            } => write!(
                f,
                "{label} has field {field:?}, which has no column in {table}"
            ),
            RowError::NoField { label, column } => {
                write!(f, "{label} has no field for column {column:?}")
            }
        }
    }
}

impl std::error::Error for RowError {}

/// One JSON field as a D1 column value.
fn column_value(value: &Value) -> SqlValue {
    match value {
        Value::Null => SqlValue::Null,
        Value::Bool(b) => SqlValue::Integer(i64::from(*b)),
        Value::Number(n) => match n.as_i64() {
            Some(i) => SqlValue::Integer(i),
            None => SqlValue::Real(n.as_f64().unwrap_or_default()),
        },
        Value::String(s) => SqlValue::Text(s.clone()),
        Value::Array(_) | Value::Object(_) => SqlValue::Text(value.to_string()),
    }
}
