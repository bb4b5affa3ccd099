//! The keys each Nomad JSON object may hold, and which of them drover reads.
//!
//! Server-owned fields that Nomad writes out (status, indexes, version) are `Ignored`: the
//! server sets its own on register, as it does for drover's own JSON.

/// Whether a key is read, or a Nomad feature refused unless empty.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Key {
    Read,
    /// A Nomad feature drover does not have: accepted only while empty.
    Refused,
    /// Set by the server on register whatever the file says.
    Ignored,
}
use Key::{Ignored, Read, Refused};

pub(super) const JOB_KEYS: &[(&str, Key)] = &[
    ("ID", Read),
    ("Name", Read),
    ("Namespace", Read),
    ("Region", Read),
    ("Type", Read),
    ("Priority", Read),
    ("Datacenters", Read),
    ("Constraints", Read),
    ("TaskGroups", Read),
    ("Update", Read),
    ("Periodic", Read),
    ("ParameterizedJob", Read),
    ("Meta", Read),
    ("Stop", Refused),
    ("Status", Ignored),
    ("StatusDescription", Ignored),
    ("Stable", Ignored),
    ("Version", Ignored),
    ("SubmitTime", Ignored),
    ("CreateIndex", Ignored),
    ("ModifyIndex", Ignored),
    ("JobModifyIndex", Ignored),
    ("ParentID", Refused),
    ("Dispatched", Refused),
    ("Payload", Refused),
    ("AllAtOnce", Refused),
    ("NodePool", Refused),
    ("Affinities", Refused),
    ("Spreads", Refused),
    ("Multiregion", Refused),
    ("Reschedule", Refused),
    ("Migrate", Refused),
    ("ConsulToken", Refused),
    ("VaultToken", Refused),
    ("VaultNamespace", Refused),
    ("ConsulNamespace", Refused),
    ("NomadTokenID", Refused),
    ("UI", Refused),
    ("DispatchIdempotencyToken", Refused),
    ("VersionTag", Refused),
];
pub(super) const GROUP_KEYS: &[(&str, Key)] = &[
    ("Name", Read),
    ("Count", Read),
    ("Constraints", Read),
    ("Tasks", Read),
    ("RestartPolicy", Read),
    ("ReschedulePolicy", Read),
    ("Disconnect", Read),
    ("MaxClientDisconnect", Read),
    ("StopAfterClientDisconnect", Read),
    ("Meta", Read),
    ("Update", Read),
    ("Affinities", Refused),
    ("Spreads", Refused),
    ("Volumes", Refused),
    ("EphemeralDisk", Read),
    ("Migrate", Read),
    ("Networks", Read),
    ("Services", Read),
    ("ShutdownDelay", Refused),
    ("Scaling", Refused),
    ("Consul", Refused),
    ("PreventRescheduleOnLost", Refused),
];
pub(super) const TASK_KEYS: &[(&str, Key)] = &[
    ("Name", Read),
    ("Driver", Read),
    ("Config", Read),
    ("Env", Read),
    ("Resources", Read),
    ("KillTimeout", Read),
    ("Meta", Read),
    ("Constraints", Read),
    // drover's own: the artifact whose warm nodes the task prefers.
    ("Snapshot", Read),
    ("User", Read),
    ("Lifecycle", Read),
    ("Affinities", Refused),
    ("Services", Read),
    ("RestartPolicy", Read),
    ("LogConfig", Refused),
    ("Artifacts", Refused),
    ("Vault", Refused),
    ("Consul", Refused),
    ("Templates", Refused),
    ("DispatchPayload", Refused),
    ("VolumeMounts", Refused),
    ("CSIPluginConfig", Refused),
    ("Leader", Refused),
    ("ShutdownDelay", Refused),
    ("KillSignal", Read),
    ("Kind", Refused),
    ("ScalingPolicies", Refused),
    ("Identity", Refused),
    ("Identities", Refused),
    ("Actions", Refused),
    ("Schedule", Refused),
];
pub(super) const RESOURCES_KEYS: &[(&str, Key)] = &[
    ("CPU", Read),
    ("MemoryMB", Read),
    ("DiskMB", Read),
    ("Cores", Refused),
    ("MemoryMaxMB", Refused),
    ("Networks", Read),
    ("Devices", Refused),
    ("IOPS", Refused),
    ("NUMA", Refused),
    ("SecretsMB", Refused),
];
pub(super) const NETWORK_KEYS: &[(&str, Key)] = &[
    ("Mode", Read),
    ("ReservedPorts", Read),
    ("DynamicPorts", Read),
    ("MBits", Refused),
    ("Device", Refused),
    ("CIDR", Refused),
    ("IP", Refused),
    ("DNS", Refused),
    ("Hostname", Refused),
    ("CNI", Refused),
];
pub(super) const PORT_KEYS: &[(&str, Key)] = &[
    ("Label", Read),
    ("Value", Read),
    ("To", Read),
    ("HostNetwork", Read),
];
pub(super) const CONSTRAINT_KEYS: &[(&str, Key)] =
    &[("LTarget", Read), ("RTarget", Read), ("Operand", Read)];
pub(super) const UPDATE_KEYS: &[(&str, Key)] = &[
    ("MaxParallel", Read),
    ("Stagger", Read),
    ("HealthCheck", Read),
    ("MinHealthyTime", Read),
    ("HealthyDeadline", Read),
    ("ProgressDeadline", Read),
    ("Canary", Read),
    ("AutoRevert", Read),
    ("AutoPromote", Read),
];
pub(super) const PERIODIC_KEYS: &[(&str, Key)] = &[
    ("Enabled", Read),
    ("Spec", Read),
    ("SpecType", Read),
    ("ProhibitOverlap", Read),
    ("TimeZone", Read),
    ("Specs", Refused),
];
pub(super) const PARAMETERIZED_KEYS: &[(&str, Key)] = &[
    ("Payload", Refused),
    ("MetaRequired", Read),
    ("MetaOptional", Read),
];
pub(super) const RESTART_KEYS: &[(&str, Key)] = &[
    ("Attempts", Read),
    ("Interval", Read),
    ("Delay", Read),
    ("Mode", Read),
    ("RenderTemplates", Refused),
];
pub(super) const RESCHEDULE_KEYS: &[(&str, Key)] = &[
    ("Attempts", Read),
    ("Interval", Read),
    ("Delay", Read),
    ("DelayFunction", Read),
    ("MaxDelay", Read),
    ("Unlimited", Read),
];
pub(super) const DISCONNECT_KEYS: &[(&str, Key)] = &[
    ("LostAfter", Read),
    ("Replace", Read),
    ("Reconcile", Read),
    ("StopOnClientAfter", Read),
];
pub(super) const LIFECYCLE_KEYS: &[(&str, Key)] = &[("Hook", Read), ("Sidecar", Read)];
pub(super) const EPHEMERAL_DISK_KEYS: &[(&str, Key)] =
    &[("SizeMB", Read), ("Sticky", Refused), ("Migrate", Refused)];
pub(super) const MIGRATE_KEYS: &[(&str, Key)] = &[
    ("MaxParallel", Read),
    ("HealthCheck", Read),
    ("MinHealthyTime", Read),
    ("HealthyDeadline", Read),
];
pub(super) const SERVICE_KEYS: &[(&str, Key)] = &[
    ("Name", Read),
    ("PortLabel", Read),
    ("Tags", Read),
    ("Meta", Read),
    ("AddressMode", Read),
    ("Provider", Read),
    ("CheckRestart", Read),
    ("Checks", Read),
    ("CanaryTags", Refused),
    ("CanaryMeta", Refused),
    ("EnableTagOverride", Refused),
    ("TaggedAddresses", Refused),
    ("Connect", Refused),
    ("Identity", Refused),
    ("Address", Refused),
    ("OnUpdate", Refused),
    ("Cluster", Refused),
    ("TaskName", Ignored),
];
pub(super) const CHECK_KEYS: &[(&str, Key)] = &[
    ("Name", Read),
    ("Type", Read),
    ("Path", Read),
    ("Method", Read),
    ("Header", Read),
    // drover's own: the one status that passes.
    ("ExpectedStatus", Read),
    ("Command", Read),
    ("Args", Read),
    ("TaskName", Read),
    ("Interval", Read),
    ("Timeout", Read),
    ("OnUpdate", Read),
    ("CheckRestart", Read),
    ("PortLabel", Refused),
    ("Protocol", Refused),
    ("Expose", Refused),
    ("AddressMode", Refused),
    ("InitialStatus", Refused),
    ("Notes", Refused),
    ("TLSServerName", Refused),
    ("TLSSkipVerify", Refused),
    ("GRPCService", Refused),
    ("GRPCUseTLS", Refused),
    ("SuccessBeforePassing", Refused),
    ("FailuresBeforeCritical", Refused),
    ("FailuresBeforeWarning", Refused),
    ("Body", Refused),
];
pub(super) const CHECK_RESTART_KEYS: &[(&str, Key)] =
    &[("Limit", Read), ("Grace", Read), ("IgnoreWarnings", Read)];
