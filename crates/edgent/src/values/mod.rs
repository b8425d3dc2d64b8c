//! The bottom layer: plain values that every other layer speaks. Messages and their content,
//! tool results and failures, rule violations ([`Invalid`]), tool policies, the thread's
//! statuses, ids, time, limits, the storage seam ([`sql::Sql`]) and the frames a thread sends.
//! It imports nothing of ours.

pub mod error;
pub mod ids;
pub mod invalid;
pub mod json_schema;
pub mod limits;
pub mod message;
pub mod page;
pub mod policy;
pub mod protocol;
pub mod redact;
pub mod schedule;
pub mod sql;
pub mod status;
pub mod time;
pub mod tool_error;
pub mod tool_name;
pub mod tool_result;
pub mod validate;

pub use error::ApiError;
pub use invalid::Invalid;
pub use message::{Message, MessageStatus, Role, ToolCall};
pub use policy::{LimitScope, RateLimit, RetryPolicy, ToolPolicy, WhenLimited, DEFAULT_TIMEOUT};
pub use status::{
    Approval, CallStatus, Order, Side, StepKind, StepStatus, ThreadStatus, WebhookStatus,
};
pub use tool_error::{Retry, ToolError};
pub use tool_result::{CallToolResult, Content, Source, SourceKind, ToolStatus};
