//! A late-filled slot: services a tool needs from a layer above this crate (the agent runtime
//! running a turn for `sessions_send`, a small model answering WebFetch's prompt). The tools are
//! registered before that layer exists; it fills the slot once it does, and a tool whose slot
//! is still empty works without it or says what is missing.

use std::sync::{Arc, OnceLock};

/// Holds one `T` once installed. Cheap to clone; every clone sees the same value.
pub struct Slot<T: ?Sized>(Arc<OnceLock<Arc<T>>>);

impl<T: ?Sized> Slot<T> {
    /// Installs `value`; `false` if the slot was already filled.
    pub fn set(&self, value: Arc<T>) -> bool {
        self.0.set(value).is_ok()
    }

    /// The value, once installed.
    pub fn get(&self) -> Option<&Arc<T>> {
        self.0.get()
    }
}

impl<T: ?Sized> Clone for Slot<T> {
    fn clone(&self) -> Self {
        Self(Arc::clone(&self.0))
    }
}

impl<T: ?Sized> Default for Slot<T> {
    fn default() -> Self {
        Self(Arc::new(OnceLock::new()))
    }
}

impl<T: ?Sized> std::fmt::Debug for Slot<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Slot")
            .field("installed", &self.0.get().is_some())
            .finish()
    }
}
