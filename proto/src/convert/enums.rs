//! Every core enum and its wire counterpart.
//!
//! Proto enums travel as `i32`. Decoding one has two ways to fail, and both are errors
//! rather than defaults: the zero `*_UNSPECIFIED` value where a value is required, and a
//! number this build does not know (a newer peer's value must not silently become another).

use super::{ConvertError, Problem, Result};
use crate::v1 as pb;
use drover_core::fsm::{EventType, Topic};
use drover_core::node_health::Readiness;
use drover_core::*;

/// A core enum with a protobuf counterpart.
pub trait WireEnum: Sized + Copy {
    /// The prost enum.
    type Proto: Copy + Into<i32> + TryFrom<i32>;

    fn to_proto(self) -> Self::Proto;

    /// `None` for the unspecified zero value.
    fn from_proto(p: Self::Proto) -> Option<Self>;

    /// The `i32` a message field holds.
    fn to_wire(self) -> i32 {
        self.to_proto().into()
    }

    /// Decodes a message field, naming it in the error.
    fn from_wire(field: &str, value: i32) -> std::result::Result<Self, ConvertError> {
        let p = Self::Proto::try_from(value)
            .map_err(|_| ConvertError::new(field, Problem::UnknownEnumValue(value)))?;
        Self::from_proto(p).ok_or_else(|| ConvertError::new(field, Problem::Unspecified))
    }
}

/// Decodes a filter field where UNSPECIFIED means "no filter"; unknown values still fail.
pub(crate) fn optional_enum<E: WireEnum>(field: &str, value: i32) -> Result<Option<E>> {
    let p = E::Proto::try_from(value)
        .map_err(|_| ConvertError::new(field, Problem::UnknownEnumValue(value)))?;
    Ok(E::from_proto(p))
}

/// One-to-one mappings of unit variants. The `match`es are exhaustive on both sides, so a
/// variant added to either enum fails to compile here until it is mapped.
macro_rules! wire_enum {
    ($core:ty => $proto:ty { $($c:ident => $p:ident),+ $(,)? }) => {
        impl WireEnum for $core {
            type Proto = $proto;

            fn to_proto(self) -> $proto {
                type P = $proto;
                match self {
                    $(Self::$c => P::$p),+
                }
            }

            fn from_proto(p: $proto) -> Option<Self> {
                type P = $proto;
                match p {
                    P::Unspecified => None,
                    $(P::$p => Some(Self::$c)),+
                }
            }
        }
    };
}

wire_enum!(Operator => pb::Operator {
    Equal => Equal,
    NotEqual => NotEqual,
    Less => Less,
    LessEqual => LessEqual,
    Greater => Greater,
    GreaterEqual => GreaterEqual,
    Regexp => Regexp,
    Version => Version,
    Semver => Semver,
    SetContains => SetContains,
    SetContainsAny => SetContainsAny,
    IsSet => IsSet,
    IsNotSet => IsNotSet,
    DistinctHosts => DistinctHosts,
    DistinctProperty => DistinctProperty,
});

wire_enum!(JobType => pb::JobType {
    Service => Service,
    Batch => Batch,
    System => System,
    SysBatch => Sysbatch,
});

wire_enum!(JobStatus => pb::JobStatus {
    Pending => Pending,
    Running => Running,
    Dead => Dead,
});

wire_enum!(PayloadRequirement => pb::PayloadRequirement {
    Optional => Optional,
    Required => Required,
    Forbidden => Forbidden,
});

wire_enum!(RestartMode => pb::RestartMode {
    Fail => Fail,
    Delay => Delay,
});

wire_enum!(LifecycleHook => pb::LifecycleHook {
    Prestart => Prestart,
    Poststart => Poststart,
    Poststop => Poststop,
});

wire_enum!(DelayFunction => pb::DelayFunction {
    Constant => Constant,
    Exponential => Exponential,
    Fibonacci => Fibonacci,
});

wire_enum!(ReconcileStrategy => pb::ReconcileStrategy {
    BestScore => BestScore,
    KeepOriginal => KeepOriginal,
    KeepReplacement => KeepReplacement,
    LongestRunning => LongestRunning,
});

wire_enum!(NodeStatus => pb::NodeStatus {
    Initializing => Initializing,
    Ready => Ready,
    Down => Down,
    Disconnected => Disconnected,
});

wire_enum!(Eligibility => pb::Eligibility {
    Eligible => Eligible,
    Ineligible => Ineligible,
});

wire_enum!(DesiredStatus => pb::DesiredStatus {
    Run => Run,
    Stop => Stop,
    Evict => Evict,
});

wire_enum!(ClientStatus => pb::ClientStatus {
    Pending => Pending,
    Running => Running,
    Complete => Complete,
    Failed => Failed,
    Lost => Lost,
    Unknown => Unknown,
});

wire_enum!(TaskRunState => pb::TaskRunState {
    Pending => Pending,
    Running => Running,
    Dead => Dead,
});

wire_enum!(SchedulerType => pb::SchedulerType {
    Service => Service,
    Batch => Batch,
    System => System,
    SysBatch => Sysbatch,
    Core => Core,
});

wire_enum!(TriggeredBy => pb::TriggeredBy {
    JobRegister => JobRegister,
    JobDeregister => JobDeregister,
    NodeUpdate => NodeUpdate,
    NodeDrain => NodeDrain,
    AllocStop => AllocStop,
    AllocFailure => AllocFailure,
    RollingUpdate => RollingUpdate,
    PeriodicJob => PeriodicJob,
    JobDispatch => JobDispatch,
    FailedFollowUp => FailedFollowUp,
    MaxPlanAttempts => MaxPlanAttempts,
    QueuedAllocs => QueuedAllocs,
    RetryFailedAlloc => RetryFailedAlloc,
    Reconnect => Reconnect,
    MaxDisconnectTimeout => MaxDisconnectTimeout,
    Preemption => Preemption,
    Scaling => Scaling,
    Scheduled => Scheduled,
    DeploymentWatcher => DeploymentWatcher,
});

wire_enum!(EvalStatus => pb::EvalStatus {
    Pending => Pending,
    Blocked => Blocked,
    Complete => Complete,
    Failed => Failed,
    Canceled => Canceled,
});

wire_enum!(SchedulerAlgorithm => pb::SchedulerAlgorithm {
    Binpack => Binpack,
    Spread => Spread,
});

wire_enum!(Topic => pb::Topic {
    Job => Job,
    Node => Node,
    Evaluation => Evaluation,
    Allocation => Allocation,
    Operator => Operator,
    Service => Service,
    Deployment => Deployment,
});

wire_enum!(DeploymentStatus => pb::DeploymentStatus {
    Running => Running,
    Paused => Paused,
    Successful => Successful,
    Failed => Failed,
    Cancelled => Cancelled,
});

wire_enum!(EventType => pb::EventType {
    JobRegistered => JobRegistered,
    JobDeregistered => JobDeregistered,
    JobStatusChanged => JobStatusChanged,
    NodeRegistration => NodeRegistration,
    NodeDeregistration => NodeDeregistration,
    NodeStatus => NodeStatus,
    NodeEligibility => NodeEligibility,
    NodeDrain => NodeDrain,
    NodeHealth => NodeHealth,
    NodeSnapshot => NodeSnapshot,
    EvaluationUpdated => EvaluationUpdated,
    EvaluationDeleted => EvaluationDeleted,
    AllocationUpdated => AllocationUpdated,
    AllocationClientUpdated => AllocationClientUpdated,
    AllocationDeleted => AllocationDeleted,
    PlanResult => PlanResult,
    SchedulerConfigUpdated => SchedulerConfigUpdated,
    ServiceRegistered => ServiceRegistered,
    ServiceDeregistered => ServiceDeregistered,
    DeploymentStatusUpdate => DeploymentStatusUpdate,
    DeploymentPromotion => DeploymentPromotion,
    DeploymentAllocHealth => DeploymentAllocHealth,
});

wire_enum!(Readiness => pb::Readiness {
    Ready => Ready,
    NotYet => NotYet,
    Never => Never,
});

/// Health carries its suspend reason in core; the wire flattens it into one enum so that
/// clients filter and count by a single value.
impl WireEnum for NodeHealth {
    type Proto = pb::NodeHealth;

    fn to_proto(self) -> pb::NodeHealth {
        match self {
            NodeHealth::Healthy => pb::NodeHealth::Healthy,
            NodeHealth::Suspended(SuspendReason::New) => pb::NodeHealth::SuspendedNew,
            NodeHealth::Suspended(SuspendReason::Lost) => pb::NodeHealth::SuspendedLost,
            NodeHealth::Suspended(SuspendReason::Flaky) => pb::NodeHealth::SuspendedFlaky,
            NodeHealth::Offlined => pb::NodeHealth::Offlined,
        }
    }

    fn from_proto(p: pb::NodeHealth) -> Option<Self> {
        match p {
            pb::NodeHealth::Unspecified => None,
            pb::NodeHealth::Healthy => Some(NodeHealth::Healthy),
            pb::NodeHealth::SuspendedNew => Some(NodeHealth::Suspended(SuspendReason::New)),
            pb::NodeHealth::SuspendedLost => Some(NodeHealth::Suspended(SuspendReason::Lost)),
            pb::NodeHealth::SuspendedFlaky => Some(NodeHealth::Suspended(SuspendReason::Flaky)),
            pb::NodeHealth::Offlined => Some(NodeHealth::Offlined),
        }
    }
}

/// Resource dimensions travel as map keys ("cpu", "memory", "disk"), spelled as core's
/// `Dimension::as_str` spells them.
pub(crate) fn parse_dimension(field: &str, key: &str) -> Result<Dimension> {
    [Dimension::Cpu, Dimension::Memory, Dimension::Disk]
        .into_iter()
        .find(|d| d.as_str() == key)
        .ok_or_else(|| ConvertError::new(field, Problem::UnknownKey(key.to_owned())))
}

wire_enum!(CheckStatus => pb::CheckStatus {
    Pending => Pending,
    Passing => Passing,
    Warning => Warning,
    Critical => Critical,
});

wire_enum!(ServiceHealth => pb::ServiceHealth {
    Passing => Passing,
    Warning => Warning,
    Critical => Critical,
});
