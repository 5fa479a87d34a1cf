//! `talon tools list`.

use std::process::ExitCode;

use serde_json::json;

use super::usage_error;
use crate::config::Config;
use crate::runtime::{self, Overrides};

pub async fn list(
    config: Config,
    profile: Option<String>,
    agent: Option<String>,
    provider: Option<String>,
    as_json: bool,
    dialect: Option<talon_core::policy::Dialect>,
    data_dir: Option<std::path::PathBuf>,
) -> ExitCode {
    let rt = match runtime::build(
        config,
        Overrides {
            default_mode: talon_core::permission::PermissionMode::Default,
            profile,
            agent,
            provider,
            data_dir,
            one_shot: true,
            ..Overrides::default()
        },
    )
    .await
    {
        Ok(rt) => rt,
        Err(e) => return crate::commands::refused(e),
    };
    let mut template = rt.template.clone();
    if dialect.is_some() {
        template.dialect = dialect;
    }
    let tools = rt.pipeline.offered_to(&template).await;
    if as_json {
        let items: Vec<_> = tools
            .iter()
            .map(|t| {
                let s = t.spec();
                json!({
                    "name": s.name,
                    "description": s.description,
                    "side_effect": s.side_effect,
                    "risk": s.risk,
                    "parallel_safe": s.parallel_safe,
                    "groups": s.groups,
                    "input_schema": t.schema(),
                })
            })
            .collect();
        let printed = serde_json::to_string_pretty(&items).map(|text| println!("{text}"));
        rt.shutdown().await;
        return printed.map_or_else(usage_error, |()| ExitCode::SUCCESS);
    }
    let width = tools
        .iter()
        .map(|t| t.spec().name.len())
        .max()
        .unwrap_or(4)
        .max(4);
    println!(
        "{:width$}  {:9}  {:12}  DESCRIPTION",
        "NAME", "RISK", "GROUPS"
    );
    for t in &tools {
        let s = t.spec();
        let summary = s.description.split(". ").next().unwrap_or_default();
        // Names and descriptions of bridged tools are the servers' words.
        println!(
            "{:width$}  {:9}  {:12}  {}",
            talon_core::visible::visible(&s.name),
            format!("{:?}", s.risk).to_lowercase(),
            s.groups.join(","),
            talon_core::visible::visible(summary)
        );
    }
    rt.shutdown().await;
    ExitCode::SUCCESS
}
