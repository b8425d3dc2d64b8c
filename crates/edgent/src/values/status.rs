//! The statuses of a thread, its sides and the order of a page.

use serde::{Deserialize, Serialize};

/// Whether a thread is working, waiting for input, or finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
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

/// Where a tool call is in its life. Stored as lowercase text; broadcast in `tool` frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CallStatus {
    /// Waiting for its turn.
    Queued,
    /// An attempt is running.
    Running,
    /// An attempt failed; the next one is due at the call's wake time.
    Retrying,
    /// A workflow sleeps until its wake time.
    Sleeping,
    /// Waiting for the outside world: a webhook (until its timeout) or an approval.
    Waiting,
    /// Over the tool's rate limit; runs when the window has room.
    RateLimited,
    /// Finished with a result.
    Success,
    /// Finished with an error result.
    Error,
}

impl CallStatus {
    /// The stored and wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            CallStatus::Queued => "queued",
            CallStatus::Running => "running",
            CallStatus::Retrying => "retrying",
            CallStatus::Sleeping => "sleeping",
            CallStatus::Waiting => "waiting",
            CallStatus::RateLimited => "rate_limited",
            CallStatus::Success => "success",
            CallStatus::Error => "error",
        }
    }

    /// Parses a stored status (`done`, from schema v1-v3, means finished).
    pub fn parse(s: &str) -> Self {
        match s {
            "queued" => CallStatus::Queued,
            "running" => CallStatus::Running,
            "retrying" => CallStatus::Retrying,
            "sleeping" => CallStatus::Sleeping,
            "waiting" => CallStatus::Waiting,
            "rate_limited" => CallStatus::RateLimited,
            "error" => CallStatus::Error,
            _ => CallStatus::Success,
        }
    }

    /// Sleeping or waiting: a run stopped part-way and will resume (not a new attempt).
    pub fn is_suspended_run(self) -> bool {
        matches!(self, CallStatus::Sleeping | CallStatus::Waiting)
    }
}

/// A tool call's approval, for tools that need one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Approval {
    /// Waiting for a client's decision.
    Pending,
    /// A client approved it: it runs.
    Approved,
    /// A client rejected it: its result is the rejection.
    Rejected,
}

impl Approval {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Approval::Pending => "pending",
            Approval::Approved => "approved",
            Approval::Rejected => "rejected",
        }
    }

    /// Parses a stored approval; anything unknown is still pending (it runs only once a
    /// client approves).
    pub fn parse(s: &str) -> Self {
        match s {
            "approved" => Approval::Approved,
            "rejected" => Approval::Rejected,
            _ => Approval::Pending,
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
eq_str!(CallStatus, Approval);

/// How a thing's name is stored and sent, and how a stored name reads back.
macro_rules! named_enum {
    ($(#[$doc:meta])* $name:ident, fallback $fb:ident, { $($(#[$vdoc:meta])* $v:ident = $s:literal),* $(,)? }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
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
    /// What a recorded workflow step is.
    StepKind, fallback Step, {
        /// A recorded computation (`flow.step`).
        Step = "step",
        /// A durable sleep (`flow.sleep`).
        Sleep = "sleep",
        /// A wait for a webhook (`flow.wait_for_webhook`).
        Webhook = "webhook",
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
    }
);
