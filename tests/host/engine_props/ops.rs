//! The operations a case applies ([`Op`]) and the strategies that draw them.

use super::*;

/// Text sizes.
#[derive(Debug, Clone, Copy)]
pub(super) enum Size {
    Empty,
    Short(u8),
    /// A few KiB.
    Long,
    /// Just past a client message's limit (32 KiB).
    OverContent,
    /// Hundreds of KiB.
    Big,
    /// Past the reply limit (1 MiB).
    OverReply,
}

pub(super) fn text(size: Size, fill: char) -> String {
    let n = match size {
        Size::Empty => 0,
        Size::Short(n) => usize::from(n) + 1,
        Size::Long => 4_000,
        Size::OverContent => MAX_CONTENT_BYTES + 1,
        Size::Big => 700_000,
        Size::OverReply => MAX_REPLY_BYTES + 1,
    };
    std::iter::repeat_n(fill, n).collect()
}

/// A tool call id as a provider might send it.
#[derive(Debug, Clone, Copy)]
pub(super) enum IdKind {
    Fresh,
    Empty,
    /// The id of the call before it in the same reply.
    SameAsPrevious,
    /// An id the thread already holds (by index).
    Reused(u8),
    /// This many characters.
    Long(u32),
    /// Characters some wire formats do not allow (`a.b`, `a b`, `a_b` …).
    Odd(u8),
}

/// Arguments as the model (or a client) sends them.
#[derive(Debug, Clone, Copy)]
pub(super) enum Args {
    /// `{"n": NS[i]}`.
    Good(u8),
    Empty,
    Broken,
    NotObject,
    WrongField,
    /// Under the reply cap raw, far over the row limit once escaped in JSON.
    Escapey,
    /// Past the reply cap.
    Huge,
}

impl Args {
    pub(super) fn raw(self) -> String {
        match self {
            Args::Good(i) => format!("{{\"n\":{}}}", NS[usize::from(i) % NS.len()]),
            Args::Empty => String::new(),
            Args::Broken => "{\"n\":".into(),
            Args::NotObject => "[1,2]".into(),
            Args::WrongField => "{\"zzz\":1}".into(),
            Args::Escapey => format!(
                "{{\"n\":1,\"pad\":\"{}\"}}",
                "\u{1}".repeat(MAX_REPLY_BYTES - 64)
            ),
            Args::Huge => format!("{{\"n\":1,\"pad\":\"{}\"}}", "h".repeat(MAX_REPLY_BYTES)),
        }
    }

    pub(super) fn value(self) -> Value {
        serde_json::from_str(&self.raw()).unwrap_or_else(|_| json!({ "n": "not a number" }))
    }
}

#[derive(Debug, Clone)]
pub(super) struct CallSpec {
    pub(super) id: IdKind,
    pub(super) tool: u8,
    pub(super) args: Args,
}

#[derive(Debug, Clone, Copy)]
pub(super) enum End {
    Whole,
    /// The stream stopped: no finish reason, no end marker.
    Cut,
    /// A finish reason without the end marker.
    FinishOnly,
}

#[derive(Debug, Clone)]
pub(super) struct ReplySpec {
    pub(super) text: Size,
    pub(super) calls: Vec<CallSpec>,
    /// When set, this many calls of `echo` past `MAX_TOOL_CALLS_PER_REPLY - 8` follow.
    pub(super) fan_out: Option<u8>,
    pub(super) end: End,
}

#[derive(Debug, Clone, Copy)]
pub(super) enum CallRef {
    None,
    Unknown,
    /// A call the thread holds (by index).
    Existing(u8),
}

#[derive(Debug, Clone, Copy)]
pub(super) enum Jump {
    Ms(u16),
    Minutes(u16),
    Days(u16),
}

#[derive(Debug, Clone)]
pub(super) enum Op {
    User(Size),
    Queue {
        tool: u8,
        args: Args,
    },
    Inject {
        role: u8,
        before: Option<u8>,
        call: CallRef,
        silent: bool,
        taken_id: bool,
        text: Size,
    },
    /// One step of the object's loop.
    Step,
    /// The model answers the call in flight (after one step of the loop when none is).
    Reply(ReplySpec),
    /// The model call fails after `partial` text (likewise).
    Fail {
        partial: bool,
        kind: u8,
    },
    /// An attempt fails after some text and the chain tries again (the reply is reset;
    /// likewise).
    Retry,
    Stop,
    Force(bool),
    Approve {
        pick: u8,
        yes: bool,
    },
    Webhook {
        pick: u8,
        known: bool,
        json: bool,
    },
    Clock(Jump),
    /// The object is evicted: its memory and the model call in flight are gone.
    Crash,
    /// The object dies at the n-th statement of the operation.
    CrashDuring(u8, Box<Op>),
    /// Answer everything until the thread rests.
    Settle,
}

fn size() -> impl Strategy<Value = Size> {
    prop_oneof![
        2 => Just(Size::Empty),
        10 => any::<u8>().prop_map(Size::Short),
        2 => Just(Size::Long),
        1 => Just(Size::OverContent),
        1 => Just(Size::Big),
        1 => Just(Size::OverReply),
    ]
}

fn args() -> impl Strategy<Value = Args> {
    prop_oneof![
        12 => any::<u8>().prop_map(Args::Good),
        1 => Just(Args::Empty),
        1 => Just(Args::Broken),
        1 => Just(Args::NotObject),
        1 => Just(Args::WrongField),
        1 => Just(Args::Escapey),
        1 => Just(Args::Huge),
    ]
}

fn id_kind() -> impl Strategy<Value = IdKind> {
    prop_oneof![
        10 => Just(IdKind::Fresh),
        1 => Just(IdKind::Empty),
        2 => Just(IdKind::SameAsPrevious),
        3 => any::<u8>().prop_map(IdKind::Reused),
        1 => prop_oneof![Just(41u32), Just(64), Just(300), Just(LONG_ID)].prop_map(IdKind::Long),
        4 => any::<u8>().prop_map(IdKind::Odd),
    ]
}

pub(super) fn tool() -> impl Strategy<Value = u8> {
    0..u8::try_from(TOOLS.len()).unwrap()
}

/// A tool for the model to call: one of [`TOOLS`], or (rarely) an unknown name of
/// [`LONG_NAME`] bytes.
fn called_tool() -> impl Strategy<Value = u8> {
    prop_oneof![40 => tool(), 1 => Just(u8::try_from(TOOLS.len()).unwrap())]
}

/// The length of the unknown tool name a model may send: under the reply cap (which counts
/// names), but its error result (the name, and the name quoted) would pass the row limit.
pub(super) const LONG_NAME: usize = 1_000_000;

/// The longest call id a model may send: under the reply cap (which counts ids), but with a
/// 1 MB result the result's row would pass the row limit.
pub(super) const LONG_ID: u32 = 999_000;

fn reply_spec() -> impl Strategy<Value = ReplySpec> {
    let call =
        (id_kind(), called_tool(), args()).prop_map(|(id, tool, args)| CallSpec { id, tool, args });
    (
        prop_oneof![3 => Just(Size::Empty), 6 => any::<u8>().prop_map(Size::Short), 1 => size()],
        prop_oneof![3 => Just(Vec::new()), 5 => prop::collection::vec(call, 1..5)],
        prop_oneof![30 => Just(None), 1 => (0u8..12).prop_map(Some)],
        prop_oneof![10 => Just(End::Whole), 1 => Just(End::Cut), 1 => Just(End::FinishOnly)],
    )
        .prop_map(|(text, calls, fan_out, end)| ReplySpec {
            text,
            calls,
            fan_out,
            end,
        })
}

fn plain_op() -> impl Strategy<Value = Op> {
    prop_oneof![
        12 => prop_oneof![10 => any::<u8>().prop_map(Size::Short), 1 => size()].prop_map(Op::User),
        6 => (tool(), args()).prop_map(|(tool, args)| Op::Queue { tool, args }),
        9 => (
            0u8..4,
            prop::option::weighted(0.4, any::<u8>()),
            prop_oneof![Just(CallRef::None), Just(CallRef::Unknown), any::<u8>().prop_map(CallRef::Existing)],
            prop::bool::weighted(0.2),
            prop::bool::weighted(0.05),
            size(),
        )
            .prop_map(|(role, before, call, silent, taken_id, text)| Op::Inject {
                role,
                before,
                call,
                silent,
                taken_id,
                text,
            }),
        30 => Just(Op::Step),
        36 => reply_spec().prop_map(Op::Reply),
        3 => (any::<bool>(), any::<u8>()).prop_map(|(partial, kind)| Op::Fail { partial, kind }),
        3 => Just(Op::Retry),
        1 => Just(Op::Stop),
        3 => any::<bool>().prop_map(Op::Force),
        12 => (any::<u8>(), prop::bool::weighted(0.7)).prop_map(|(pick, yes)| Op::Approve { pick, yes }),
        6 => (any::<u8>(), prop::bool::weighted(0.8), prop::bool::weighted(0.8))
            .prop_map(|(pick, known, json)| Op::Webhook { pick, known, json }),
        9 => prop_oneof![
            4 => any::<u16>().prop_map(|ms| Jump::Ms(ms % 5_000)),
            2 => any::<u16>().prop_map(|m| Jump::Minutes(m % 600)),
            1 => any::<u16>().prop_map(|d| Jump::Days(d % 800)),
        ]
        .prop_map(Op::Clock),
        6 => Just(Op::Crash),
    ]
}

pub(super) fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        36 => plain_op(),
        12 => (
            prop_oneof![3 => 0u8..6, 2 => 0u8..16, 1 => 0u8..64],
            plain_op()
        )
            .prop_map(|(n, op)| Op::CrashDuring(n, Box::new(op))),
        1 => Just(Op::Settle),
    ]
}
