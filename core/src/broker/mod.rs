//! The eval broker (leader only). Being built.
