//! The agent a case runs: its options ([`Setup`]), drawn at random, and the `AgentConfig` of
//! each side built from them.

use super::*;

/// How the thread's agent is configured for a case.
#[derive(Debug, Clone)]
pub(super) struct Setup {
    pub(super) dual: bool,
    pub(super) parallel: bool,
    /// `max_history_tokens` (`None`: the default).
    pub(super) budget: Option<u32>,
    pub(super) max_steps: u32,
    pub(super) max_turns: u32,
    pub(super) stop_tool: bool,
    /// The tools this case's calls draw from (indexes into [`TOOLS`]): a few per case, so
    /// that calls of the same tool meet (two calls for one rate-limit slot, say).
    pub(super) palette: Vec<u8>,
    /// How the case ends before settling: 0 a crash; 1 a stop, then a crash; 2 a crash, then
    /// a stop (what a crash leaves on a stopped thread).
    pub(super) finale: u8,
}

impl Setup {
    /// The tool a generated index names.
    pub(super) fn tool(&self, i: u8) -> u8 {
        self.palette[usize::from(i) % self.palette.len()]
    }
}

pub(super) fn setup() -> impl Strategy<Value = Setup> {
    (
        (
            prop::bool::weighted(0.25),
            any::<bool>(),
            prop_oneof![Just(None), (20u32..2_000).prop_map(Some)],
            1u32..8,
            prop_oneof![3 => Just(1_000u32), 1 => 2u32..12],
            prop::bool::weighted(0.3),
        ),
        prop::collection::vec(tool(), 1..5),
        prop_oneof![4 => Just(0u8), 1 => Just(1u8), 1 => Just(2u8)],
    )
        .prop_map(
            |((dual, parallel, budget, max_steps, max_turns, stop_tool), palette, finale)| Setup {
                dual,
                parallel,
                budget,
                max_steps,
                // Settling runs a dual_ai conversation to its end: keep it short.
                max_turns: if dual { max_turns.min(8) } else { max_turns },
                stop_tool,
                palette,
                finale,
            },
        )
}

pub(super) fn agent_config(s: &Setup, names: &[&str], side: Side) -> AgentConfig {
    let mut side_cfg = json!({ "prompt": "support", "max_steps": s.max_steps });
    if s.stop_tool {
        side_cfg["stop_tool"] = json!("finish");
        side_cfg["stop_tool_response_property"] = json!("answer");
    }
    let mut agent = json!({
        "id": "support",
        "kind": if s.dual { "dual_ai" } else { "ai_human" },
        "side_a": side_cfg.clone(),
        "max_turns": s.max_turns,
    });
    if s.dual {
        let mut b = side_cfg;
        b["label"] = json!("other");
        agent["side_b"] = b;
    }
    let mut model = json!({
        "name": "default", "provider": "openai", "model": "m",
        "base_url": "https://model.invalid/v1",
    });
    if let Some(budget) = s.budget {
        model["max_history_tokens"] = json!(budget);
    }
    let prompt = json!({
        "name": "support", "model": "default", "system": "be helpful",
        "tools": names, "parallel_tool_calls": s.parallel,
    });
    AgentConfig {
        agent: serde_json::from_value(agent).unwrap(),
        side,
        prompt: serde_json::from_value(prompt).unwrap(),
        models: vec![serde_json::from_value(model).unwrap()],
        delegates: Vec::new(),
        compaction: None,
        selection_models: Vec::new(),
    }
}
