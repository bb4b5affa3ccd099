//! The job writes: register (from Nomad's JSON job, read by core's reader), stop and
//! purge, plan (and validate, which is a plan's validation), dispatch, periodic force, and
//! the three Nomad calls drover spells as a registration of a changed spec, as its own CLI
//! does: scale, revert and evaluate.

use super::jobs::current;
use super::{Ctx, body};
use crate::nomad::job::NomadJob;
use crate::nomad::misc::{JobDeregisterResponse, JobRegisterResponse};
use crate::query::Call;
use crate::reply::{self, ApiError};
use axum::extract::{Path, State};
use axum::response::Response;
use base64::Engine;
use bytes::Bytes;
use drover_core::types::Job;
use drover_proto::v1 as pb;
use serde::Deserialize;
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap};

/// Nomad's `JobRegisterRequest` (and `JobPlanRequest`: `Diff` rides along). Fields
/// Nomad's clients send that change nothing here (sentinel overrides, the job's source,
/// the write request's region and token) are taken and left unread.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase", deny_unknown_fields)]
struct RegisterBody {
    job: Option<Value>,
    #[serde(default)]
    enforce_index: bool,
    #[serde(default)]
    job_modify_index: u64,
    #[serde(default)]
    diff: bool,
    #[serde(default)]
    preserve_counts: bool,
    #[serde(default)]
    eval_priority: i64,
    #[serde(default, rename = "PolicyOverride")]
    _policy_override: Value,
    #[serde(default, rename = "Submission")]
    _submission: Value,
    #[serde(default, rename = "Region")]
    _region: Value,
    #[serde(default, rename = "Namespace")]
    _namespace: Value,
    #[serde(default, rename = "SecretID")]
    _secret_id: Value,
    #[serde(default, rename = "IdempotencyToken")]
    _idempotency_token: Value,
}

/// The job of a register or plan body, as the gRPC API takes it; `path_id` is the id in
/// the URL, which the body's must match.
fn submitted(call: &Call, b: &RegisterBody, path_id: Option<&str>) -> Result<pb::Job, ApiError> {
    if b.preserve_counts {
        return Err(ApiError::BadRequest(
            "PreserveCounts: a Nomad feature drover does not support".into(),
        ));
    }
    if b.eval_priority != 0 {
        return Err(ApiError::BadRequest(
            "EvalPriority: a Nomad feature drover does not support".into(),
        ));
    }
    let value = b
        .job
        .as_ref()
        .ok_or_else(|| ApiError::BadRequest("missing job: the body needs a Job".into()))?;
    let mut job = drover_core::jobspec::decode_nomad_job(value, "request body")
        .map_err(|e| ApiError::BadRequest(e.to_string()))?;
    if let Some(id) = path_id
        && job.id.as_str() != id
    {
        return Err(ApiError::BadRequest(format!(
            "job id {:?} in the body does not match {id:?} in the path",
            job.id.as_str()
        )));
    }
    if job.namespace.is_empty() {
        job.namespace = call.namespace().to_string();
    }
    Ok(pb::Job::from(&job))
}

async fn register(
    ctx: &Ctx,
    call: &Call,
    job: pb::Job,
    enforce: Option<u64>,
) -> Result<Response, ApiError> {
    let req = call.creds.request(pb::RegisterJobRequest {
        job: Some(job),
        enforce_index: enforce,
    });
    let r = ctx.grpc.jobs().register(req).await?.into_inner();
    let answer = JobRegisterResponse {
        eval_id: r.eval_id,
        eval_create_index: r.index,
        job_modify_index: r.job_modify_index,
        warnings: r.warnings.join("\n"),
        index: r.index,
    };
    Ok(reply::written(ctx.meta(r.index), &answer))
}

fn register_body(bytes: &Bytes) -> Result<RegisterBody, ApiError> {
    body(bytes)
}

pub async fn register_new(
    State(ctx): State<Ctx>,
    call: Call,
    bytes: Bytes,
) -> Result<Response, ApiError> {
    register_from(&ctx, &call, &bytes, None).await
}

pub async fn register_at(
    State(ctx): State<Ctx>,
    call: Call,
    Path(id): Path<String>,
    bytes: Bytes,
) -> Result<Response, ApiError> {
    register_from(&ctx, &call, &bytes, Some(&id)).await
}

/// `POST /v1/jobs` and `POST /v1/job/:id` alike; the path's id, when there is one, must be
/// the job's.
async fn register_from(
    ctx: &Ctx,
    call: &Call,
    bytes: &Bytes,
    id: Option<&str>,
) -> Result<Response, ApiError> {
    let b = register_body(bytes)?;
    let job = submitted(call, &b, id)?;
    register(
        ctx,
        call,
        job,
        b.enforce_index.then_some(b.job_modify_index),
    )
    .await
}

pub async fn deregister(
    State(ctx): State<Ctx>,
    call: Call,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let req = call.creds.request(pb::DeregisterJobRequest {
        namespace: call.namespace().to_string(),
        job_id: id,
        purge: call.flag("purge")?,
    });
    let r = ctx.grpc.jobs().deregister(req).await?.into_inner();
    let answer = JobDeregisterResponse {
        eval_id: r.eval_id,
        eval_create_index: r.index,
        job_modify_index: r.index,
        index: r.index,
    };
    Ok(reply::written(ctx.meta(r.index), &answer))
}

pub async fn plan(
    State(ctx): State<Ctx>,
    call: Call,
    Path(id): Path<String>,
    bytes: Bytes,
) -> Result<Response, ApiError> {
    let b = register_body(&bytes)?;
    let job = submitted(&call, &b, Some(&id))?;
    let req = call.creds.request(pb::PlanJobRequest {
        job: Some(job),
        validate_only: false,
    });
    let r = ctx.grpc.jobs().plan(req).await?.into_inner();
    let updates: BTreeMap<&String, Value> = r
        .desired_updates
        .iter()
        .map(|(g, u)| {
            let counts = json!({
                "Place": u.place, "Stop": u.stop, "Migrate": u.migrate,
                "InPlaceUpdate": u.in_place_update, "DestructiveUpdate": u.destructive_update,
                "Ignore": u.ignore, "Preemptions": u.preemptions, "Canary": 0,
                "Reconnect": u.reconnect, "Disconnect": u.disconnect,
                "RescheduleNow": u.reschedule_now, "RescheduleLater": u.reschedule_later,
            });
            (g, counts)
        })
        .collect();
    let failed: BTreeMap<&String, crate::nomad::alloc::AllocationMetric> =
        r.failures.iter().map(|(g, m)| (g, m.into())).collect();
    let diff_type = match (r.spec_changed, r.job_version) {
        (true, 0) => "Added",
        (true, _) => "Edited",
        _ => "None",
    };
    let answer = json!({
        "Index": r.index,
        "JobModifyIndex": r.index,
        "CreatedEvals": [],
        "Diff": if b.diff { json!({ "ID": id, "Type": diff_type }) } else { Value::Null },
        "Annotations": { "DesiredTGUpdates": updates },
        "FailedTGAllocs": failed,
        "NextPeriodicLaunch": "0001-01-01T00:00:00Z",
        "Warnings": "",
        "HasChanges": r.has_changes,
    });
    Ok(reply::written(ctx.meta(r.index), &answer))
}

/// Nomad's `/v1/validate/job`: the job is read as a registration reads it and handed to
/// the gRPC API's plan with `validate_only`, which validates it as a registration does and
/// needs `read-job`, as Nomad's validate does. Its problems are the answer, as Nomad's `JobValidateResponse`, not an error;
/// a body that is not a register request is refused as one.
pub async fn validate(
    State(ctx): State<Ctx>,
    call: Call,
    bytes: Bytes,
) -> Result<Response, ApiError> {
    let b = register_body(&bytes)?;
    let problem = match submitted(&call, &b, None) {
        Err(ApiError::BadRequest(why)) if b.job.is_some() => Some(why),
        Err(e) => return Err(e),
        Ok(job) => {
            let req = call.creds.request(pb::PlanJobRequest {
                job: Some(job),
                validate_only: true,
            });
            match ctx.grpc.jobs().plan(req).await {
                Ok(_) => None,
                Err(s) if s.code() == tonic::Code::InvalidArgument => Some(s.message().to_string()),
                Err(s) => return Err(s.into()),
            }
        }
    };
    let answer = json!({
        "DriverConfigValidated": problem.is_none(),
        "ValidationErrors": problem.as_ref().map(|p| vec![p]),
        "Error": problem.unwrap_or_default(),
        "Warnings": "",
    });
    Ok(reply::json(ctx.meta(0), "", &answer))
}

/// Nomad's evaluate: drover registers the current spec again (check-and-set on its
/// modify index), which commits a fresh evaluation with it.
pub async fn evaluate(
    State(ctx): State<Ctx>,
    call: Call,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let (job, _) = current(&ctx, &call, &id).await?;
    let enforce = job.job_modify_index;
    register(&ctx, &call, pb::Job::from(&job), Some(enforce)).await
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
struct RevertBody {
    job_version: u64,
    #[serde(default)]
    enforce_prior_version: Option<u64>,
}

pub async fn revert(
    State(ctx): State<Ctx>,
    call: Call,
    Path(id): Path<String>,
    bytes: Bytes,
) -> Result<Response, ApiError> {
    let b: RevertBody = body(&bytes)?;
    let req = call.creds.request(pb::JobVersionsRequest {
        query: None,
        namespace: call.namespace().to_string(),
        job_id: id.clone(),
    });
    let versions = ctx.grpc.jobs().versions(req).await?.into_inner().versions;
    let newest = versions
        .first()
        .ok_or_else(|| ApiError::NotFound(format!("job {id:?} not found")))?;
    if let Some(prior) = b.enforce_prior_version
        && prior != newest.version
    {
        return Err(ApiError::BadRequest(format!(
            "EnforcePriorVersion {prior}: the current version is {}",
            newest.version
        )));
    }
    let enforce = newest.job_modify_index;
    let target = versions
        .iter()
        .find(|j| j.version == b.job_version)
        .ok_or_else(|| {
            ApiError::BadRequest(format!(
                "JobVersion {}: job {id:?} has no such version",
                b.job_version
            ))
        })?;
    register(&ctx, &call, target.clone(), Some(enforce)).await
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
struct ScaleBody {
    count: Option<i64>,
    #[serde(default)]
    target: HashMap<String, String>,
}

/// Nomad's scale: the current spec with one group's count changed, registered with
/// check-and-set as `drover job scale` does.
pub async fn scale(
    State(ctx): State<Ctx>,
    call: Call,
    Path(id): Path<String>,
    bytes: Bytes,
) -> Result<Response, ApiError> {
    let b: ScaleBody = body(&bytes)?;
    let count = b.count.ok_or_else(|| {
        ApiError::BadRequest("Count: required (drover records no scaling events)".into())
    })?;
    let count = u32::try_from(count)
        .map_err(|_| ApiError::BadRequest(format!("Count: {count} is not a count")))?;
    let group_name = b
        .target
        .get("Group")
        .ok_or_else(|| ApiError::BadRequest("Target.Group: required".into()))?;
    let (mut job, _) = current(&ctx, &call, &id).await?;
    let group = job
        .groups
        .iter_mut()
        .find(|g| &g.name == group_name)
        .ok_or_else(|| {
            ApiError::BadRequest(format!(
                "Target.Group: job {id:?} has no group {group_name:?}"
            ))
        })?;
    group.count = count;
    let enforce = job.job_modify_index;
    register(&ctx, &call, pb::Job::from(&job), Some(enforce)).await
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
struct DispatchBody {
    #[serde(default)]
    payload: Option<String>,
    #[serde(default)]
    meta: HashMap<String, String>,
}

pub async fn dispatch(
    State(ctx): State<Ctx>,
    call: Call,
    Path(id): Path<String>,
    bytes: Bytes,
) -> Result<Response, ApiError> {
    let b: DispatchBody = if bytes.is_empty() {
        DispatchBody {
            payload: None,
            meta: HashMap::new(),
        }
    } else {
        body(&bytes)?
    };
    let payload = match b.payload.as_deref() {
        None | Some("") => Vec::new(),
        Some(p) => base64::engine::general_purpose::STANDARD
            .decode(p)
            .map_err(|e| ApiError::BadRequest(format!("Payload: not base64: {e}")))?,
    };
    let req = call.creds.request(pb::DispatchJobRequest {
        namespace: call.namespace().to_string(),
        job_id: id,
        payload,
        meta: b.meta.into_iter().collect(),
    });
    let r = ctx.grpc.jobs().dispatch(req).await?.into_inner();
    let answer = json!({
        "DispatchedJobID": r.dispatched_job_id,
        "EvalID": r.eval_id,
        "EvalCreateIndex": r.index,
        "JobCreateIndex": r.index,
        "Index": r.index,
    });
    Ok(reply::written(ctx.meta(r.index), &answer))
}

pub async fn periodic_force(
    State(ctx): State<Ctx>,
    call: Call,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let req = call.creds.request(pb::PeriodicForceRequest {
        namespace: call.namespace().to_string(),
        job_id: id,
    });
    let r = ctx.grpc.jobs().periodic_force(req).await?.into_inner();
    let answer = json!({ "EvalID": r.eval_id, "EvalCreateIndex": r.index, "Index": r.index });
    Ok(reply::written(ctx.meta(r.index), &answer))
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase", deny_unknown_fields)]
struct ParseBody {
    #[serde(rename = "JobHCL")]
    job_hcl: String,
    #[serde(default)]
    canonicalize: bool,
    #[serde(default, rename = "HCLv1")]
    hcl_v1: bool,
    /// HCL variable assignments, as a `-var-file` holds them.
    #[serde(default)]
    variables: String,
}

/// HCL (with its variables given as a var file's text in `Variables`) into Nomad's JSON
/// job: core's parser, nothing sent to a server. `file()` reads nothing here: the server
/// is not where the job file lives.
pub async fn parse(bytes: Bytes) -> Result<Response, ApiError> {
    let b: ParseBody = body(&bytes)?;
    if b.hcl_v1 {
        return Err(ApiError::BadRequest(
            "HCLv1: drover reads HCL2 job files only".into(),
        ));
    }
    let _ = b.canonicalize;
    let inputs = drover_core::jobspec::Inputs {
        var_files: (!b.variables.is_empty())
            .then(|| ("Variables".to_string(), b.variables))
            .into_iter()
            .collect(),
        // Fresh `uuid()`s each parse, as Nomad's.
        seed: rand::random(),
        ..Default::default()
    };
    let job: Job = drover_core::jobspec::parse_hcl_with(&b.job_hcl, "JobHCL", &inputs)
        .map_err(|e| ApiError::BadRequest(e.to_string()))?;
    Ok(axum::response::IntoResponse::into_response(axum::Json(
        NomadJob::from(&job),
    )))
}
