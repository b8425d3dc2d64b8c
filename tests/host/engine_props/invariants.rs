//! The invariants checked after every operation (see the module docs): calls and their results
//! as stored, the pending reply, the caps on stored text; a `Wait` that ends; a thread at rest.

use super::*;

use edgent::values::limits::{MAX_ERROR_TEXT_BYTES, MAX_STEP_VALUE_BYTES, MAX_TOOL_RESULT_BYTES};

impl World {
    /// `Wait` must end by itself (a wake time) or by a client (an approval).
    pub(super) fn check_wait(&self, t: &Thread<'_>) {
        if self.storage.faulting() {
            return;
        }
        let wake = t.poll_timeout().unwrap();
        let approvals = self.strings(
            "SELECT id FROM tool_calls WHERE approval = 'pending' AND status NOT IN ('success', 'error')",
        );
        assert!(
            wake.is_some() || !approvals.is_empty(),
            "the turn waits for nothing: no wake time and no call awaiting approval"
        );
    }

    /// A thread at rest: not running, no call without a result, no pending reply.
    pub(super) fn check_rest(&self) {
        let summary = self.host.thread().summary().unwrap();
        let open = self.strings(
            "SELECT id || ' ' || name || ' ' || status FROM tool_calls WHERE status NOT IN ('success', 'error')",
        );
        let pending = self.strings("SELECT id FROM messages WHERE status = 'pending'");
        assert!(
            summary.status != ThreadStatus::Running && open.is_empty() && pending.is_empty(),
            "the thread is stranded: status {:?}, calls without a result {open:?}, pending replies {pending:?}",
            summary.status
        );
    }

    /// The stored invariants (see the module docs).
    pub(super) fn check(&self) {
        let too_big = self.storage.too_big.borrow().clone();
        assert!(
            too_big.is_empty(),
            "SQLite refused a statement as too big (a limit breached without a clear error): {too_big:?}"
        );
        let conn = &self.host.db.0;
        let rows = |sql: &str| -> Vec<Vec<Option<String>>> {
            let mut stmt = conn.prepare(sql).unwrap();
            let n = stmt.column_count();
            stmt.query_map([], |r| (0..n).map(|i| r.get(i)).collect())
                .unwrap()
                .map(Result::unwrap)
                .collect()
        };
        let short = |id: &str| id.chars().take(40).collect::<String>();
        // Every message that lists calls, read once: each call listed once in the thread, by
        // a completed assistant reply.
        let mut listed_by: HashMap<String, String> = HashMap::new();
        for row in rows(
            "SELECT id, role, status, tool_calls FROM messages
             WHERE tool_calls IS NOT NULL AND tool_calls != '[]'",
        ) {
            let [Some(message), Some(role), Some(status), Some(listed)] = &row[..] else {
                panic!("a message row without its columns");
            };
            assert_eq!(role, "assistant", "message {message} lists calls");
            assert_eq!(
                status, "completed",
                "reply {message} keeps calls while {status}"
            );
            for c in serde_json::from_str::<Vec<Value>>(listed).unwrap() {
                let id = c["id"].as_str().unwrap().to_owned();
                let twice = listed_by.insert(id.clone(), message.clone());
                assert!(twice.is_none(), "call id {} is listed twice", short(&id));
            }
        }
        // The engine's results, by the call they answer.
        let mut results: HashMap<String, Vec<String>> = HashMap::new();
        for row in rows(&format!(
            "SELECT tool_call_id, id FROM messages WHERE role = 'tool' AND id NOT LIKE '{INJECTED}%'"
        )) {
            let [call, Some(message)] = &row[..] else {
                panic!("a result row without its columns");
            };
            results
                .entry(call.clone().unwrap_or_default())
                .or_default()
                .push(message.clone());
        }
        // Each call: listed by its message; finished with exactly one result it points at, or
        // unfinished with none.
        let calls = rows("SELECT id, status, result_message_id, message_id FROM tool_calls");
        for row in &calls {
            let [Some(id), Some(status), result_id, Some(message)] = &row[..] else {
                panic!("a call row without its columns");
            };
            assert_eq!(
                listed_by.get(id),
                Some(message),
                "call {} is not listed by its message",
                short(id)
            );
            let found = results.remove(id).unwrap_or_default();
            if matches!(status.as_str(), "success" | "error") {
                assert_eq!(
                    found.len(),
                    1,
                    "finished call {} has {} results",
                    short(id),
                    found.len()
                );
                assert_eq!(result_id.as_ref(), Some(&found[0]), "call {}", short(id));
            } else {
                assert!(
                    found.is_empty() && result_id.is_none(),
                    "unfinished call {} ({status}) has a result",
                    short(id)
                );
            }
        }
        assert_eq!(
            listed_by.len(),
            calls.len(),
            "a reply lists calls that have no row"
        );
        let orphans: Vec<String> = results.keys().map(|k| short(k)).collect();
        assert!(orphans.is_empty(), "results of no call: {orphans:?}");
        // At most one pending reply: the one in flight.
        let pending = self.strings("SELECT id FROM messages WHERE status = 'pending'");
        assert!(pending.len() <= 1, "{} replies are pending", pending.len());
        if let (Some(call), Some(p)) = (&self.model, pending.first()) {
            assert_eq!(
                &call.message_id, p,
                "the pending reply is not the one in flight"
            );
        }
        // Stored texts within their caps.
        let cap = |sql: &str| -> i64 {
            conn.query_row(sql, [], |r| r.get::<_, Option<i64>>(0))
                .unwrap()
                .unwrap_or(0)
        };
        let text_cap = i64::try_from(MAX_REPLY_BYTES.max(MAX_TOOL_RESULT_BYTES) + 1024).unwrap();
        assert!(cap("SELECT MAX(length(CAST(content AS BLOB))) FROM messages") <= text_cap);
        assert!(
            cap("SELECT MAX(length(CAST(arguments AS BLOB))) FROM tool_calls")
                <= i64::try_from(MAX_REPLY_BYTES).unwrap()
        );
        // `tool_steps` exists once a durable step was recorded (a feature table).
        let has_steps = cap("SELECT COUNT(*) FROM sqlite_master WHERE name = 'tool_steps'") > 0;
        assert!(
            !has_steps
                || cap("SELECT MAX(length(CAST(value AS BLOB))) FROM tool_steps")
                    <= i64::try_from(MAX_STEP_VALUE_BYTES + 64).unwrap()
        );
        assert!(
            cap("SELECT MAX(length(CAST(last_error AS BLOB))) FROM tool_calls")
                <= i64::try_from(MAX_ERROR_TEXT_BYTES + 64).unwrap()
        );
    }
}
