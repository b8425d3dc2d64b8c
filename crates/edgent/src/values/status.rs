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
