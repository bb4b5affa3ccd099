//! Job validation. Being built.
