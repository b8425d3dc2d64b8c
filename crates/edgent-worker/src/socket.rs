//! A client socket's frames as the runtime hands them over: still JavaScript values, measured
//! before any byte is copied into the module's memory.
//!
//! workerd delivers each message whole (it closes a socket whose message passes its own limit,
//! 32 MiB, with 1009). The `worker` crate's glue for `webSocketMessage` copies that message into
//! wasm memory before the handler runs, so a 30 MiB frame grew the object's linear memory by
//! 30 MiB for good (wasm memory never shrinks) before the 64 KiB check refused it. `serve!`
//! exports the socket handlers itself, through here: a frame too long to be within the limit
//! and any binary frame are refused without being copied.

#[cfg(target_arch = "wasm32")]
use wasm_bindgen::{JsCast, JsValue};
#[cfg(target_arch = "wasm32")]
use worker::js_sys::JsString;
#[cfg(target_arch = "wasm32")]
use worker::{WebSocket, WebSocketIncomingMessage};

#[cfg(target_arch = "wasm32")]
use super::ThreadObject;
#[cfg(target_arch = "wasm32")]
use edgent::values::protocol::{ServerFrame, MAX_FRAME_BYTES};

/// What to do with a frame, from its JS value.
#[cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]
#[derive(Debug, PartialEq, Eq)]
enum Admit {
    /// A text frame that may be within the limit: copy it and let the thread parse it (which
    /// checks its exact size in bytes).
    Text,
    /// A text frame longer than the limit.
    TooLarge,
    /// Anything else (an `ArrayBuffer`).
    Binary,
}

/// A text frame of `utf16_units` UTF-16 code units is over `max` bytes when the units alone
/// are: UTF-8 takes at least one byte per unit (1 for ASCII, 2-3 for other units, 4 per
/// surrogate pair), so the byte length is never smaller.
#[cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]
fn admit(utf16_units: Option<u32>, max: usize) -> Admit {
    match utf16_units {
        None => Admit::Binary,
        Some(units) if usize::try_from(units).map_or(true, |u| u > max) => Admit::TooLarge,
        Some(_) => Admit::Text,
    }
}

/// A frame from a client socket (`webSocketMessage`).
#[cfg(target_arch = "wasm32")]
pub async fn websocket_message(
    thread: &ThreadObject,
    ws: WebSocket,
    message: JsValue,
) -> worker::Result<()> {
    let text = message.dyn_ref::<JsString>();
    match admit(text.map(JsString::length), MAX_FRAME_BYTES) {
        Admit::Text => {
            let text = text.map(String::from).unwrap_or_default();
            thread
                .websocket_message(ws, WebSocketIncomingMessage::String(text))
                .await
        }
        Admit::TooLarge => {
            let why = format!("frames are limited to {MAX_FRAME_BYTES} bytes");
            send(&ws, &ServerFrame::error("frame_too_large", why, None));
            Ok(())
        }
        Admit::Binary => {
            let why = "binary frames are not supported; send JSON text";
            send(&ws, &ServerFrame::error("bad_frame", why, None));
            Ok(())
        }
    }
}

#[cfg(target_arch = "wasm32")]
fn send(ws: &WebSocket, frame: &ServerFrame) {
    let _ = ws.send_with_str(frame.to_json());
}

#[cfg(test)]
mod tests {
    use super::*;
    use edgent::values::protocol::MAX_FRAME_BYTES;

    #[test]
    fn a_frame_is_measured_before_it_is_copied() {
        assert_eq!(admit(Some(0), 10), Admit::Text);
        assert_eq!(admit(Some(10), 10), Admit::Text);
        assert_eq!(admit(Some(11), 10), Admit::TooLarge);
        assert_eq!(admit(Some(u32::MAX), MAX_FRAME_BYTES), Admit::TooLarge);
        assert_eq!(admit(None, 10), Admit::Binary);
    }
}
