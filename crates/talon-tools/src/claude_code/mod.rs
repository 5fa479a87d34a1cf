//! The Claude Code dialect: Claude Code's tool names, parameters and messages.

pub mod todo_write;
