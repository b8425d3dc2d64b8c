//! Client tokens as the thread sees them: minting (the signing secret is the platform's),
//! revocation by generation, and the check of each operation against its caller.

use std::rc::Rc;

use serde_json::{json, Value};

use super::ThreadRuntime;
use crate::api::access::{self, Access, ClientToken, MintRequest, Principal, TOKEN_SECRET};
use crate::api::ops::ThreadOp;
use crate::api::ApiError;

impl ThreadRuntime {
    /// Whether `principal` may perform an operation needing `access` here: the server always;
    /// a client token (already verified by the router) only within its scopes and only if the
    /// thread has not revoked its generation since, nor has it expired meanwhile.
    pub fn authorize(&self, principal: &Principal, access: Access) -> Result<(), ApiError> {
        let Principal::Client(token) = principal else {
            return Ok(());
        };
        let (thread_id, generation) =
            self.with_thread(|t| Ok((t.summary()?.thread_id, t.token_generation()?)))?;
        // The router matched the token to the route's thread; checked again here, where the
        // thread's own id is known, so no path into the object can widen a token.
        if token.thread_id != thread_id {
            return Err(ApiError::new(
                403,
                "forbidden",
                "this token is for another thread",
            ));
        }
        principal.check(access, generation, self.now() / 1000)
    }

    /// [`ThreadRuntime::authorize`] for a client operation (its scope per
    /// [`ThreadOp::access`]).
    pub fn authorize_op(&self, principal: &Principal, op: &ThreadOp) -> Result<(), ApiError> {
        if *principal == Principal::Server {
            return Ok(());
        }
        self.authorize(principal, op.access(self.platform.registry()))
    }

    /// Applies `op` for `principal`: refused outside its scope, and what a client token reads
    /// is cut to what watchers may see (no webhook URLs in tool call records).
    pub async fn apply_as(
        self: &Rc<Self>,
        principal: &Principal,
        op: ThreadOp,
    ) -> Result<Value, ApiError> {
        self.authorize_op(principal, &op)?;
        let redact = *principal != Principal::Server && matches!(op, ThreadOp::GetToolCalls(_));
        let mut answer = self.apply(op).await?;
        if redact {
            access::redact_records(&mut answer);
        }
        Ok(answer)
    }

    /// A client token for this thread: `{token, expires_at, scopes, thread_id}`.
    pub(super) fn mint_token(&self, request: &MintRequest) -> Result<Value, ApiError> {
        let (thread_id, generation) =
            self.with_thread(|t| Ok((t.summary()?.thread_id, t.token_generation()?)))?;
        let secret = self.platform.secret(TOKEN_SECRET).unwrap_or_default();
        let token = ClientToken {
            thread_id,
            scopes: request.scopes.clone(),
            expires_at: self.now() / 1000 + request.ttl_seconds,
            generation,
        };
        let text = access::mint(&secret, &token)?;
        Ok(json!({
            "token": text,
            "expires_at": token.expires_at,
            "scopes": token.scopes,
            "thread_id": token.thread_id,
        }))
    }

    /// Revokes every token minted so far: `{generation}`. The driver then closes the sockets
    /// that were opened with them.
    pub(super) fn revoke_tokens(&self) -> Result<Value, ApiError> {
        let generation = self.with_thread(|t| t.revoke_tokens())?;
        Ok(json!({ "generation": generation }))
    }
}
