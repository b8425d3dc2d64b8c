//! Performing a compaction the engine asked for ([`Action::Compact`]): the prompt's
//! `compaction_prompt` reads the transcript of the older messages (and the summary they
//! extend) and its model writes the new summary, through the same model chain as any call
//! (retries, fallbacks, the request log, the thread's token budget). Nothing is streamed to
//! clients; the engine keeps the summary and says so with a `compaction` event.
//!
//! [`Action::Compact`]: crate::engine::thread::Action::Compact

use super::chain::{run_chain, CollectSink, RequestParts};
use super::ThreadRuntime;
use crate::config::AgentConfig;
use crate::engine::thread::{CompactJob, Thread};
use crate::llm::stream::Completion;
use crate::tool::offer::Offer;
use crate::values::message::{Message, Role};

impl ThreadRuntime {
    /// Has the compaction prompt's model summarise `job`, and hands the outcome to the
    /// engine.
    pub(super) async fn compact(
        &self,
        thread: &mut Thread<'_>,
        config: &AgentConfig,
        job: CompactJob,
    ) {
        let outcome = match &config.compaction {
            None => Err("the prompt has no compaction_prompt".to_owned()),
            Some((prompt, models)) => {
                let summariser = AgentConfig {
                    agent: config.agent.clone(),
                    side: config.side,
                    prompt: prompt.clone(),
                    models: models.clone(),
                    delegates: Vec::new(),
                    compaction: None,
                    selection_models: Vec::new(),
                };
                let history = [Message::new(Role::User, job.transcript(), self.now())];
                // No tools: the summariser only writes.
                let no_tools = Offer::default();
                let parts = RequestParts {
                    system: &prompt.system,
                    history: &history,
                    offer: &no_tools,
                    config: &summariser,
                    // A summary is text, whatever the summarising prompt asks of its answers.
                    output: None,
                    memo: None,
                };
                let mut sink = CollectSink {
                    runtime: self,
                    thread,
                    completion: Completion::default(),
                    models,
                    sub_prompt_of: None,
                };
                let ran = run_chain(&*self.platform, models, &parts, &mut sink).await;
                ran.map(|()| sink.completion.text)
                    .map_err(|e| e.to_string())
            }
        };
        if let Err(e) = thread.handle_compaction(self.now(), job, outcome) {
            self.platform
                .log_error(&format!("could not store a summary: {e}"));
        }
    }
}
