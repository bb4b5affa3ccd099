"""python-nomad against `drover dev`: a job with an `update` block rolled out on the real
agent, its deployments read, paused, resumed, promoted and failed, and the services of
the job and of one allocation read."""

import copy
import os
import queue

import requests

from harness import check, client, eventually, finish, raises
import nomad

n = client()
exc = nomad.api.exceptions
ADDR = os.environ["NOMAD_ADDR"]
SECOND = 1_000_000_000

JOB = {
    "ID": "py-deploy",
    "Name": "py-deploy",
    "Type": "service",
    "Datacenters": ["dc1"],
    "Constraints": [{"LTarget": "${node.class}", "RTarget": "simulated", "Operand": "!="}],
    "Update": {
        "MaxParallel": 1,
        "Canary": 1,
        "AutoPromote": False,
        "AutoRevert": False,
        "HealthCheck": "task_states",
        "MinHealthyTime": 1 * SECOND,
        "HealthyDeadline": 20 * SECOND,
        "ProgressDeadline": 120 * SECOND,
    },
    "TaskGroups": [
        {
            "Name": "web",
            "Count": 2,
            "Networks": [{"DynamicPorts": [{"Label": "http"}]}],
            "Services": [
                {"Name": "py-deploy-web", "PortLabel": "http", "Provider": "nomad", "Tags": ["py"]}
            ],
            "Tasks": [
                {
                    "Name": "server",
                    "Driver": "raw_exec",
                    "Config": {"command": "/bin/sleep", "args": ["600"]},
                    "Resources": {"CPU": 50, "MemoryMB": 32},
                }
            ],
        }
    ],
}


def version(v):
    """The job as version `v` registers it: a changed command line."""
    job = copy.deepcopy(JOB)
    job["TaskGroups"][0]["Tasks"][0]["Config"]["args"] = [str(600 + v)]
    return job


def deployment_of(job_version, want):
    """The job's deployment of `job_version` once want(deployment) holds."""

    def read():
        for d in n.job.get_deployments("py-deploy"):
            if d["JobVersion"] == job_version and want(d):
                return d
        return None

    return eventually(f"the deployment of version {job_version}", read)


def get(path):
    return requests.get(f"{ADDR}{path}", timeout=15)


# The Deployment topic of the event stream, followed from before the first rollout.
stream, stop_stream, events = n.event.stream.get_stream(topic="Deployment", event_queue=queue.Queue())
stream.daemon = True
stream.start()

# Version 0: no older version to canary against; it rolls out and succeeds.
n.jobs.register_job({"Job": version(0)})
first = deployment_of(0, lambda d: d["Status"] == "successful")
web = first["TaskGroups"]["web"]
check(
    "the first deployment counts its two healthy allocations",
    (web["DesiredTotal"], web["PlacedAllocs"], web["HealthyAllocs"], web["UnhealthyAllocs"])
    == (2, 2, 2, 0),
    first,
)
check("no canary for the first version", web["DesiredCanaries"] == 0 and not web["PlacedCanaries"], web)
check(
    "the group's update settings ride along",
    web["AutoPromote"] is False and web["AutoRevert"] is False and web["ProgressDeadline"] == 120 * SECOND,
    web,
)
check("its description says so", first["StatusDescription"] == "Deployment completed successfully", first)
check("it names its job", first["JobID"] == "py-deploy" and first["Namespace"] == "default", first)



def success_event():
    """The event of the first deployment's success, once it is on the stream."""
    try:
        frame = events.get(timeout=0.5)
    except queue.Empty:
        return None
    for e in frame.get("Events", []):
        d = e["Payload"].get("Deployment") or {}
        if e["Topic"] == "Deployment" and d.get("ID") == first["ID"] and d.get("Status") == "successful":
            return e
    return None


event = eventually("the first deployment's success on the event stream", success_event)
check(
    "the event carries the whole deployment",
    event["Type"] == "DeploymentStatusUpdate" and event["Payload"]["Deployment"]["TaskGroups"]["web"]["HealthyAllocs"] == 2,
    event,
)
stop_stream.set()

listed = n.deployments.get_deployments()
check("deployments are listed", [d["ID"] for d in listed] == [first["ID"]], listed)
check(
    "a prefix narrows the list",
    [d["ID"] for d in n.deployments.get_deployments(prefix=first["ID"][:6])] == [first["ID"]],
)
check("every namespace lists it too", any(d["ID"] == first["ID"] for d in n.deployments.get_deployments(namespace="*")))
check("a deployment reads back by id", n.deployment.get_deployment(first["ID"])["JobVersion"] == 0)
check("and by a unique prefix", n.deployment.get_deployment(first["ID"][:8])["ID"] == first["ID"])
raises(
    "an unknown deployment is not found",
    exc.URLNotFoundNomadException,
    lambda: n.deployment.get_deployment("0123abcd-0000-4000-8000-000000000000"),
)

placed = n.deployment.get_deployment_allocations(first["ID"])
check("the deployment's allocations are its two", len(placed) == 2, placed)
check(
    "each is marked healthy for it",
    all(a["DeploymentID"] == first["ID"] and a["DeploymentStatus"]["Healthy"] is True for a in placed),
    placed,
)

# The services of the job and of one of its allocations.
alloc_ids = sorted(a["ID"] for a in placed)
services = eventually(
    "both allocations' services to register",
    lambda: (lambda s: s if sorted(r["AllocID"] for r in s) == alloc_ids else None)(
        get("/v1/job/py-deploy/services").json()
    ),
)
check(
    "the job's services are its registrations",
    all(r["ServiceName"] == "py-deploy-web" and r["JobID"] == "py-deploy" and r["Port"] > 0 for r in services),
    services,
)
one = get(f"/v1/allocation/{alloc_ids[0]}/services").json()
check(
    "an allocation's services are its own",
    [(r["AllocID"], r["ServiceName"], r["Tags"]) for r in one] == [(alloc_ids[0], "py-deploy-web", ["py"])],
    one,
)
check("a job the cluster does not have has no services", get("/v1/job/absent/services").status_code == 404)

# Version 1: one canary beside the old allocations, waiting to be promoted.
n.jobs.register_job({"Job": version(1)})
second = deployment_of(
    1, lambda d: len(d["TaskGroups"]["web"]["PlacedCanaries"]) == 1 and d["TaskGroups"]["web"]["HealthyAllocs"] == 1
)
web = second["TaskGroups"]["web"]
check("the canary is healthy and not promoted", web["DesiredCanaries"] == 1 and web["Promoted"] is False, web)
check("it waits for promotion", second["Status"] == "running" and "manual promotion" in second["StatusDescription"], second)
check("the job's latest deployment is the new one", n.job.get_deployment("py-deploy")["ID"] == second["ID"])
check(
    "the job's deployments are listed newest first",
    [d["ID"] for d in n.job.get_deployments("py-deploy")] == [second["ID"], first["ID"]],
)
ascending = get("/v1/deployments?ascending=true").json()
check("?ascending lists them oldest first", [d["ID"] for d in ascending] == [first["ID"], second["ID"]], ascending)
canary = n.allocation.get_allocation(web["PlacedCanaries"][0])
check(
    "the canary allocation carries its deployment status",
    canary["DeploymentID"] == second["ID"]
    and canary["DeploymentStatus"]["Canary"] is True
    and canary["DeploymentStatus"]["Healthy"] is True,
    canary,
)

paused = n.deployment.pause_deployment(second["ID"], True)
check(
    "pause answers the deployment's new index and no evaluation",
    paused["EvalID"] == "" and paused["DeploymentModifyIndex"] == paused["Index"] > second["ModifyIndex"],
    paused,
)
check("the deployment is paused", n.deployment.get_deployment(second["ID"])["Status"] == "paused")
raises(
    "a paused deployment does not pause again",
    exc.BaseNomadException,
    lambda: n.deployment.pause_deployment(second["ID"], True),
)
resumed = n.deployment.pause_deployment(second["ID"], False)
check(
    "resume answers the evaluation it created",
    len(resumed["EvalID"]) == 36 and resumed["EvalCreateIndex"] == resumed["Index"],
    resumed,
)
check("the deployment runs again", n.deployment.get_deployment(second["ID"])["Status"] == "running")

promoted = n.deployment.promote_deployment_all(second["ID"])
check("promote answers an evaluation", len(promoted["EvalID"]) == 36, promoted)
done = deployment_of(1, lambda d: d["Status"] == "successful")
web = done["TaskGroups"]["web"]
check(
    "the promoted deployment completes with every allocation healthy",
    web["Promoted"] is True and web["HealthyAllocs"] >= web["DesiredTotal"] == 2 and web["UnhealthyAllocs"] == 0,
    done,
)
running = eventually(
    "version 1 to replace version 0",
    lambda: (lambda a: a if sorted(x["JobVersion"] for x in a) == [1, 1] else None)(
        [a for a in n.job.get_allocations("py-deploy") if a["ClientStatus"] == "running" and a["DesiredStatus"] == "run"]
    ),
)
check("two allocations of version 1 run", len(running) == 2, running)
raises(
    "a finished deployment is not promoted again",
    exc.BaseNomadException,
    lambda: n.deployment.promote_deployment_all(second["ID"]),
)

# Version 2, failed by hand while its canary runs.
n.jobs.register_job({"Job": version(2)})
third = deployment_of(2, lambda d: len(d["TaskGroups"]["web"]["PlacedCanaries"]) == 1)
failed = n.deployment.fail_deployment(third["ID"])
check("fail answers an evaluation", len(failed["EvalID"]) == 36 and failed["Index"] > 0, failed)
read = n.deployment.get_deployment(third["ID"])
check(
    "the deployment is failed, by the user",
    read["Status"] == "failed" and read["StatusDescription"] == "Deployment marked as failed",
    read,
)
raises("a failed deployment does not fail again", exc.BaseNomadException, lambda: n.deployment.fail_deployment(third["ID"]))
raises(
    "manual allocation health is not served",
    exc.BaseNomadException,
    lambda: n.deployment.deployment_allocation_health(third["ID"], healthy_allocations=[]),
)

n.job.deregister_job("py-deploy", purge=True)
finish()
