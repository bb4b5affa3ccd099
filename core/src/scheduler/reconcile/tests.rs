//! Reconciler unit tests live with the scheduler scenarios (scheduler/tests).
