//! The permission modes a turn starts in, from the entry point, the session and the
//! configuration.

use talon_core::permission::PermissionMode;
use talon_tools::claude_code::config::{MODE_BEFORE_PLAN, PERMISSION_MODE};

/// A permission mode a session stored under `setting`.
pub(super) fn stored_mode(
    settings: &serde_json::Map<String, serde_json::Value>,
    setting: &str,
) -> Option<PermissionMode> {
    settings
        .get(setting)
        .and_then(|m| serde_json::from_value(m.clone()).ok())
}

/// The modes a turn starts in: the one it runs in, and the one an approved plan returns to.
///
/// The entry point's explicit mode (`talon chat --permission-mode`) is the person's choice and
/// applies as given. Otherwise the session's stored mode (the model's `Config` calls, an
/// approved plan) applies only where it is stricter than the `configured` one: an operator who
/// tightens the configuration tightens every session. An approved plan returns to the mode
/// before plan mode (kept with the session while it plans; the configured one when the session
/// started in plan mode), never looser than the configured one.
pub(super) fn turn_modes(
    configured: PermissionMode,
    explicit: Option<PermissionMode>,
    settings: &serde_json::Map<String, serde_json::Value>,
) -> (PermissionMode, PermissionMode) {
    let stored = stored_mode(settings, PERMISSION_MODE);
    let mode = explicit.unwrap_or_else(|| stored.map_or(configured, |s| s.stricter(configured)));
    let before_plan = match (mode, stored) {
        (PermissionMode::Plan, Some(PermissionMode::Plan)) => {
            stored_mode(settings, MODE_BEFORE_PLAN).unwrap_or(configured)
        }
        (PermissionMode::Plan, _) => configured,
        (mode, _) => mode,
    };
    (mode, before_plan.stricter(configured))
}
