//! What the agent runtime lends the tools below it: `sessions_send` runs its turns with the
//! [`Runner`], and WebFetch's prompt is answered by the calling agent's small model.

use futures::future::BoxFuture;
use talon_agent::TurnStop;
use talon_core::CallContext;

use crate::agent_runs::TurnRequest;
use crate::runner::Runner;

impl talon_tools::claude_code::web_fetch::PageAnswerer for Runner {
    fn answer<'a>(
        &'a self,
        ctx: &'a CallContext,
        prompt: &'a str,
        content: &'a str,
    ) -> BoxFuture<'a, Option<Result<String, String>>> {
        Box::pin(async move {
            let agent = ctx.agent_key.as_deref()?;
            // An agent without a usable model has no small model either.
            let built = self.engine().agent(agent).await.ok()?;
            let answer = built.agent.answer_about(content, prompt).await?;
            Some(answer.map_err(|e| e.to_string()))
        })
    }
}

impl talon_tools::sessions::SessionSender for Runner {
    fn send<'a>(
        &'a self,
        ctx: &'a CallContext,
        session_key: &'a str,
        text: &'a str,
    ) -> BoxFuture<'a, Result<String, String>> {
        Box::pin(async move {
            let ran = self
                .run(
                    TurnRequest {
                        agent: ctx.agent_key.as_deref(),
                        user: ctx.user.as_deref(),
                        session: Some(session_key.to_string()),
                        history: Vec::new(),
                        prompt: text.to_string(),
                        channel: "session",
                        client: None,
                        permission_mode: None,
                        // Cancelling the sending call cancels the turn it started.
                        cancel: ctx.cancel.child_token(),
                        api: Default::default(),
                        child: None,
                        delivering: Vec::new(),
                        origin: None,
                    },
                    &|_| {},
                )
                .await
                .map_err(|e| e.to_string())?;
            match ran.outcome.stop {
                TurnStop::Failed(why) => Err(format!("the turn failed: {why}")),
                TurnStop::PromptBlocked(why) => Err(format!("the message was refused: {why}")),
                TurnStop::Cancelled => Err("the turn was cancelled".into()),
                _ => Ok(ran.outcome.text),
            }
        })
    }
}
