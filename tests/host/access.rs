//! The thread's half of the access model (`ThreadRuntime::authorize` / `apply_as`): a client
//! token works only on its own thread, within its scopes, until the thread revokes its
//! generation or it expires; what it reads is cut to what watchers may see.

use std::rc::Rc;

use serde_json::json;

use edgent::api::access::{Access, ClientToken, Principal, Scope};
use edgent::api::ops::ThreadOp;
use edgent::prelude::*;
use edgent::testing::TestHost;

const T0: i64 = 1_700_000_000_000;

fn host() -> Rc<TestHost> {
    let echo =
        Tool::new("Echoes.").handler(|_flow: FlowState| async { CallToolResult::text("echoed") });
    let registry = edgent::tool::Registry::build(vec![("echo", echo)]).unwrap();
    TestHost::new(registry, T0).into_rc()
}

fn token(thread_id: &str, scopes: &[Scope], generation: i64) -> Principal {
    Principal::Client(ClientToken {
        thread_id: thread_id.to_owned(),
        scopes: scopes.to_vec(),
        expires_at: T0 / 1000 + 60,
        generation,
    })
}

#[test]
fn a_token_works_on_its_own_thread_within_its_scopes_until_revoked_or_expired() {
    let h = host();
    let rt = h.runtime();
    let id = h.thread().summary().unwrap().thread_id;
    let chat = token(&id, &[Scope::Chat], 0);
    assert!(rt.authorize(&chat, Access::Chat).is_ok());
    assert_eq!(
        rt.authorize(&chat, Access::Approve).unwrap_err().status,
        403
    );
    assert_eq!(rt.authorize(&chat, Access::Server).unwrap_err().status, 403);
    // A token for another thread is refused here too, whatever the router did.
    let other = token("another-thread", &[Scope::Chat, Scope::Approve], 0);
    let refused = rt.authorize(&other, Access::Chat).unwrap_err();
    assert_eq!((refused.status, refused.code), (403, "forbidden"));
    // Server-only operations through the one entry point both transports use.
    let inject = ThreadOp::from_rpc("inject_message", &json!({"role": "system", "content": "x"}));
    let e = h.run(rt.apply_as(&chat, inject.unwrap())).unwrap_err();
    assert_eq!(e.code, "forbidden");
    // Revoked: generation 0 is gone once the thread is at 1.
    h.run(rt.apply(ThreadOp::RevokeTokens)).unwrap();
    assert_eq!(rt.authorize(&chat, Access::Chat).unwrap_err().status, 401);
    assert!(rt
        .authorize(&token(&id, &[Scope::Chat], 1), Access::Chat)
        .is_ok());
    // Expired: a minute later.
    h.advance(61_000);
    assert_eq!(
        rt.authorize(&token(&id, &[Scope::Chat], 1), Access::Chat)
            .unwrap_err()
            .status,
        401
    );
    assert!(rt.authorize(&Principal::Server, Access::Server).is_ok());
}
