//! The AI SDK's chat transport on a thread's object: `POST …/chat` opens an answer stream and
//! then applies the request's operations (so the stream sees every frame of the turn), and
//! `GET …/chat/stream` resumes the answer in progress from the frame log. The answers
//! themselves (UI message stream parts from frames) are `crate::chat`'s.

use worker::{Request, Response, Result};

use super::{principal_of, ThreadObject};
use crate::chat;
use crate::http::{error, read_body_within};
use edgent::api::access::Access;
use edgent::api::ops::ThreadOp;
use edgent::api::ui_stream::{ChatRequest, UiStream};
use edgent::api::ApiError;
use edgent::values::limits::MAX_CHAT_BODY_BYTES;

impl ThreadObject {
    /// `POST /api/threads/:id/chat`: the AI SDK's chat transport. The answer's stream is
    /// opened before the message is stored, so it sees every frame of the turn.
    pub(super) async fn chat(&self, req: &mut Request) -> Result<Response> {
        match self.start_chat(req).await {
            Ok(rx) => chat::response(rx),
            Err(e) => error(&e),
        }
    }

    async fn start_chat(
        &self,
        req: &mut Request,
    ) -> std::result::Result<
        futures_channel::mpsc::UnboundedReceiver<worker::Result<Vec<u8>>>,
        ApiError,
    > {
        let rt = self.runtime()?;
        let principal = principal_of(req)?;
        let body = read_body_within(req, MAX_CHAT_BODY_BYTES).await?;
        let ops = match ChatRequest::parse(&body)? {
            ChatRequest::Submit(post) => vec![ThreadOp::SendMessage(post)],
            ChatRequest::Regenerate => vec![ThreadOp::Regenerate],
            ChatRequest::Decide(decisions) => decisions
                .into_iter()
                .map(ThreadOp::DecideApproval)
                .collect(),
        };
        for op in &ops {
            rt.authorize_op(&principal, op)?;
        }
        if matches!(ops.first(), Some(ThreadOp::SendMessage(_))) && rt.answer_in_progress()? {
            // Its frames would start this answer in the middle of another.
            return Err(ApiError::new(
                409,
                "conflict",
                "an answer is being written: resume it (GET …/chat/stream) or wait for it",
            ));
        }
        let mut ui = UiStream::new();
        for op in &ops {
            if let ThreadOp::DecideApproval(d) = op {
                if !d.approved {
                    ui.deny(&d.tool_call_id);
                }
            }
        }
        let rx = self.chats.open(&principal, ui, []);
        for op in ops {
            // A refused op drops `rx` with the error: the stream is removed at the next frame.
            rt.apply(op).await?;
        }
        Ok(rx)
    }

    /// `GET /api/threads/:id/chat/stream` (or `…/chat/:chat_id/stream`, the AI SDK's default
    /// reconnect URL): the answer in progress from its start, then live; 204 when none is.
    pub(super) fn resume_chat(&self, req: &Request) -> Result<Response> {
        let replay = self.runtime().and_then(|rt| {
            let principal = principal_of(req)?;
            rt.authorize(&principal, Access::Chat)?;
            Ok((principal, rt.answer_replay()?))
        });
        match replay {
            Ok((_, None)) => Ok(Response::empty()?.with_status(204)),
            // Older than the log keeps (an answer of thousands of frames): live only.
            Ok((principal, Some(replay))) if replay.reset => {
                chat::response(self.chats.open(&principal, UiStream::new(), []))
            }
            Ok((principal, Some(replay))) => chat::response(self.chats.open(
                &principal,
                UiStream::new(),
                replay.frames.iter().map(String::as_str),
            )),
            Err(e) => error(&e),
        }
    }
}

/// Whether `path` (in the object's namespace) is the AI SDK's resume of an answer.
pub(super) fn is_chat_resume(path: &str) -> bool {
    let Some(rest) = path.strip_prefix("/op/chat/") else {
        return false;
    };
    match rest.split('/').collect::<Vec<_>>().as_slice() {
        ["stream"] => true,
        [chat_id, "stream"] => !chat_id.is_empty(),
        _ => false,
    }
}
