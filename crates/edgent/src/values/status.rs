//! The statuses of a thread, its sides and the order of a page.

use serde::{Deserialize, Serialize};

/// Whether a thread is working, waiting for input, or finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ThreadStatus {
    /// Waiting for a message.
    Idle,
    /// A turn is in progress (model calls and tools).
    Running,
    /// Stopped by a user or a rule; new messages are refused.
    Stopped,
}

impl ThreadStatus {
    /// Lowercase SQL/wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            ThreadStatus::Idle => "idle",
            ThreadStatus::Running => "running",
            ThreadStatus::Stopped => "stopped",
        }
    }

    pub(crate) fn parse(s: &str) -> Self {
        match s {
            "running" => ThreadStatus::Running,
            "stopped" => ThreadStatus::Stopped,
            _ => ThreadStatus::Idle,
        }
    }
}

/// One of the two sides of a thread: `a` is the agent; `b` is the human (or a second agent
/// in a dual-AI thread).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Side {
    /// The agent's side.
    #[default]
    A,
    /// The other side.
    B,
}

impl Side {
    /// `a` or `b`.
    pub fn as_str(self) -> &'static str {
        match self {
            Side::A => "a",
            Side::B => "b",
        }
    }

    /// The other side.
    pub fn other(self) -> Self {
        match self {
            Side::A => Side::B,
            Side::B => Side::A,
        }
    }

    /// Parses `a`/`b` (either case).
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "a" | "A" => Some(Side::A),
            "b" | "B" => Some(Side::B),
            _ => None,
        }
    }
}

/// Oldest-first or newest-first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Order {
    /// Oldest first.
    #[default]
    Asc,
    /// Newest first.
    Desc,
}

impl Order {
    /// The SQL keyword (`ASC` or `DESC`) for an `ORDER BY`.
    pub(crate) fn sql(self) -> &'static str {
        match self {
            Self::Asc => "ASC",
            Self::Desc => "DESC",
        }
    }
}

/// Lets tests and callers compare a status with its wire name (`status == "queued"`).
macro_rules! eq_str {
    ($($t:ty),*) => {$(
        impl PartialEq<&str> for $t {
            fn eq(&self, other: &&str) -> bool {
                self.as_str() == *other
            }
        }
        impl PartialEq<str> for $t {
            fn eq(&self, other: &str) -> bool {
                self.as_str() == other
            }
        }
    )*};
}

/// How a thing's name is stored and sent, and how a stored name reads back.
macro_rules! named_enum {
    ($(#[$doc:meta])* $name:ident, fallback $fb:ident, { $($(#[$vdoc:meta])* $v:ident = $s:literal),* $(,)? }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
        #[serde(rename_all = "snake_case")]
        pub enum $name {
            $($(#[$vdoc])* $v,)*
        }

        impl $name {
            /// The stored and wire name.
            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$v => $s,)*
                }
            }

            /// Reads a stored name (an unknown one reads as the safe default).
            pub fn parse(s: &str) -> Self {
                match s {
                    $($s => $name::$v,)*
                    _ => $name::$fb,
                }
            }
        }

        eq_str!($name);
    };
}

named_enum!(
    /// Where a tool call is in its life. Stored as text and broadcast in `tool` frames; `done`
    /// rows from schema v1-v3 (and any unknown name) read as `success`.
    CallStatus, fallback Success, {
        /// Waiting for its turn.
        Queued = "queued",
        /// An attempt is running.
        Running = "running",
        /// An attempt failed; the next one is due at the call's wake time.
        Retrying = "retrying",
        /// A workflow sleeps until its wake time.
        Sleeping = "sleeping",
        /// Waiting for the outside world: a webhook (until its timeout) or an approval.
        Waiting = "waiting",
        /// Over the tool's rate limit; runs when the window has room.
        RateLimited = "rate_limited",
        /// Finished with a result.
        Success = "success",
        /// Finished with an error result.
        Error = "error",
    }
);

impl CallStatus {
    /// Sleeping or waiting: a run stopped part-way and will resume (not a new attempt).
    pub fn is_suspended_run(self) -> bool {
        matches!(self, CallStatus::Sleeping | CallStatus::Waiting)
    }
}

named_enum!(
    /// A tool call's approval, for tools that need one; an unknown stored name reads as
    /// pending (the call runs only once a client approves).
    Approval, fallback Pending, {
        /// Waiting for a client's decision.
        Pending = "pending",
        /// A client approved it: it runs.
        Approved = "approved",
        /// A client rejected it: its result is the rejection.
        Rejected = "rejected",
    }
);

named_enum!(
    /// What a recorded workflow step is.
    StepKind, fallback Step, {
        /// A recorded computation (`flow.step`).
        Step = "step",
        /// A durable sleep (`flow.sleep`).
        Sleep = "sleep",
        /// A wait for a webhook (`flow.wait_for_webhook`).
        Webhook = "webhook",
        /// A race of sleeps and webhooks (`flow.race`): its value is the winner.
        Race = "race",
    }
);

named_enum!(
    /// Where a recorded workflow step is.
    StepStatus, fallback Running, {
        /// Running (or cut short by a crash: it runs again).
        Running = "running",
        /// A sleep that has not ended.
        Sleeping = "sleeping",
        /// A webhook wait that has not ended.
        Waiting = "waiting",
        /// Finished; its value is returned on every replay.
        Done = "done",
        /// The step's closure failed.
        Failed = "failed",
        /// A webhook wait that ended without a delivery.
        TimedOut = "timed_out",
        /// A wait of a race that another wait won: it ends without waking the workflow.
        Cancelled = "cancelled",
    }
);

named_enum!(
    /// Where a webhook is.
    WebhookStatus, fallback Open, {
        /// Waiting for its one delivery.
        Open = "open",
        /// Delivered: its body resumed the workflow.
        Received = "received",
        /// Its wait ended without a delivery.
        TimedOut = "timed_out",
        /// Another wait of its race finished first: it takes no body.
        Closed = "closed",
    }
);
