"""python-nomad against `drover dev` with ACLs off, doing what its users do."""

import queue

from harness import check, client, eventually, finish, raises
import nomad

n = client()
exc = nomad.api.exceptions

JOB = {
    "ID": "py-web",
    "Name": "py-web",
    "Type": "service",
    "Datacenters": ["dc1"],
    "Constraints": [{"LTarget": "${node.class}", "RTarget": "simulated", "Operand": "!="}],
    "TaskGroups": [
        {
            "Name": "web",
            "Count": 1,
            "Tasks": [
                {
                    "Name": "server",
                    "Driver": "raw_exec",
                    "Config": {
                        "command": "/bin/sh",
                        "args": ["-c", "echo hello from python-nomad; exec sleep 600"],
                    },
                    "Resources": {"CPU": 50, "MemoryMB": 32},
                }
            ],
        }
    ],
}

# Nodes: the dev agent and the simulated ones.
nodes = n.nodes.get_nodes()
check("nodes are listed", len(nodes) >= 2, nodes)
real = [x for x in nodes if x["NodeClass"] != "simulated"]
sim = [x for x in nodes if x["NodeClass"] == "simulated"]
check("the real agent is listed", len(real) == 1, nodes)
node = n.node.get_node(sim[0]["ID"])
check("a node reads back", node["ID"] == sim[0]["ID"] and node["Status"] == "ready", node)
check("drover's health rides along", node.get("Health") == "healthy", node)

# The event stream, followed from before the changes below.
stream, stop_stream, events = n.event.stream.get_stream(event_queue=queue.Queue())
stream.daemon = True
stream.start()

# Register from JSON, list and read back.
reg = n.jobs.register_job({"Job": JOB})
check("register answers an eval", len(reg.get("EvalID", "")) == 36, reg)
jobs = n.jobs.get_jobs()
check("the job is listed", any(j["ID"] == "py-web" for j in jobs), jobs)
job = n.job.get_job("py-web")
check("the job reads back", job["TaskGroups"][0]["Tasks"][0]["Config"]["command"] == "/bin/sh", job)
again = n.job.register_job("py-web", {"Job": job})
check("a job read back registers again", len(again.get("EvalID", "")) == 36, again)

# Evaluations.
ev = eventually(
    "the registration's eval to complete",
    lambda: (lambda e: e if e["Status"] == "complete" else None)(
        n.evaluation.get_evaluation(reg["EvalID"])
    ),
)
check("the eval names the job", ev["JobID"] == "py-web" and ev["TriggeredBy"] == "job-register", ev)
check("the eval is listed", any(e["ID"] == reg["EvalID"] for e in n.evaluations.get_evaluations()))
check("the job's evals are listed", len(n.job.get_evaluations("py-web")) >= 1)

# Allocations.
allocs = eventually(
    "the job's allocation to run",
    lambda: [a for a in n.job.get_allocations("py-web") if a["ClientStatus"] == "running"],
)
alloc = allocs[0]
check("it runs on the real agent", alloc["NodeID"] == real[0]["ID"], alloc)
check("allocations are listed", any(a["ID"] == alloc["ID"] for a in n.allocations.get_allocations()))
read = n.allocation.get_allocation(alloc["ID"])
check("an allocation reads back", read["TaskStates"]["server"]["State"] == "running", read)

# Logs, through the servers.
logs = eventually(
    "the task's stdout",
    lambda: (lambda t: t if "hello from python-nomad" in t else None)(
        n.client.stream_logs.stream(alloc["ID"], "server", "stdout", plain=True)
    ),
)
check("logs read", "hello from python-nomad" in logs, logs)
framed = n.client.stream_logs.stream(alloc["ID"], "server", "stdout")
check("framed logs carry Data", '"Data"' in framed, framed)

# Eligibility and drain on a simulated node.
target = sim[0]["ID"]
n.node.eligible_node(target, ineligible=True)
check("marked ineligible", n.node.get_node(target)["SchedulingEligibility"] == "ineligible")
n.node.eligible_node(target, eligible=True)
check("marked eligible again", n.node.get_node(target)["SchedulingEligibility"] == "eligible")
drained = n.node.drain_node_with_spec(target, {"Deadline": 60_000_000_000, "IgnoreSystemJobs": False})
check("drain answers", "Index" in drained, drained)


def drained_or_draining(node, deadline_ns):
    """A drain is on with its deadline, or (the node had nothing to move) it already ended
    by itself: the drain leader duty finishes an empty node's drain at once, leaving it
    ineligible with the event saying so."""
    if node["SchedulingEligibility"] != "ineligible":
        return False
    if node["Drain"]:
        return deadline_ns is None or node["DrainStrategy"]["DrainSpec"]["Deadline"] == deadline_ns
    last = node["Events"][-1]["Message"] if node["Events"] else ""
    return last.startswith("node drain complete")


draining = n.node.get_node(target)
check(
    "the node drains, ineligible, with its deadline",
    drained_or_draining(draining, 60_000_000_000),
    draining,
)
n.node.drain_node_with_spec(target, None, mark_eligible=True)
undrained = n.node.get_node(target)
check(
    "a drain is switched off and the node marked eligible",
    undrained["Drain"] is False and undrained["SchedulingEligibility"] == "eligible",
    undrained,
)
n.node.drain_node(target, True)
check("the older ?enable form drains too", drained_or_draining(n.node.get_node(target), None))
n.node.drain_node(target, False)
check("and stops draining", n.node.get_node(target)["Drain"] is False)
n.node.eligible_node(target, eligible=True)

# The event stream saw the node's changes.
def node_event():
    try:
        frame = events.get(timeout=0.5)
    except queue.Empty:
        return None
    return any(e["Topic"] == "Node" for e in frame.get("Events", []))


eventually("a Node event on the stream", node_event)
check("the event stream delivers Node events", True)
stop_stream.set()

# A job without an update block rolls out without a deployment.
check("a job without an update block has no deployment", n.job.get_deployment("py-web") is None)
check("nor a list of them", n.job.get_deployments("py-web") == [])

# Stop, then purge.
stopped = n.job.deregister_job("py-web")
check("stop answers an eval", "EvalID" in stopped, stopped)
check("a stopped job stays, marked stopped", n.job.get_job("py-web")["Stop"] is True)
n.job.deregister_job("py-web", purge=True)
raises("a purged job is gone", exc.URLNotFoundNomadException, lambda: n.job.get_job("py-web"))

# HCL with variables, parsed by the servers into Nomad's JSON job.
HCL = """variable "n" {
  default = 2
}
locals {
  name = upper("parsed")
}
job "parsed" {
  meta = { name = local.name }
  group "g" {
    count = var.n
    task "t" {
      driver = "raw_exec"
      config { command = "/bin/true" }
    }
  }
}
"""
parsed = n.jobs.parse(HCL)
check(
    "jobs/parse evaluates variables and functions",
    parsed["TaskGroups"][0]["Count"] == 2 and parsed["Meta"]["name"] == "PARSED",
    parsed,
)

# Purge forgets a node (a simulated agent registers again, as Nomad's client does).
purged = n.node.purge_node(sim[-1]["ID"])
check(
    "purge answers Nomad's node update",
    isinstance(purged.get("EvalIDs"), list) and purged.get("Index", 0) > 0,
    purged,
)
raises(
    "purging an unknown node is a 404",
    exc.URLNotFoundNomadException,
    lambda: n.node.purge_node("6f3a1c2e-0000-4000-8000-00000000000f"),
)

finish()
