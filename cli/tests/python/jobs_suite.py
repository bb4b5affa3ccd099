"""python-nomad against `drover dev`: the job calls beside register and stop (validate,
plan, evaluate, scale, versions, revert, summary, periodic force, dispatch), an
allocation's restart and stop, and the cluster reads clients make (leader, peers, agent,
members, raft configuration, search)."""

from harness import check, client, eventually, finish, raises
import nomad

n = client()
exc = nomad.api.exceptions

TASK = {
    "Name": "t",
    "Driver": "raw_exec",
    "Config": {"command": "/bin/sh", "args": ["-c", "exec sleep 600"]},
    "Resources": {"CPU": 50, "MemoryMB": 32},
}
# On the dev agent, which runs raw_exec (the simulated nodes run only the mock driver).
ON_AGENT = [{"LTarget": "${node.class}", "RTarget": "simulated", "Operand": "!="}]


def job(id_, type_="service", count=1, constraints=ON_AGENT, **extra):
    body = {
        "ID": id_,
        "Type": type_,
        "Constraints": constraints,
        "TaskGroups": [{"Name": "g", "Count": count, "Tasks": [TASK]}],
    }
    body.update(extra)
    return body


def completed(eval_id):
    return eventually(
        f"eval {eval_id} to complete",
        lambda: (lambda e: e if e["Status"] == "complete" else None)(
            n.evaluation.get_evaluation(eval_id)
        ),
    )


# Validate: nothing registered, problems answered.
valid = n.validate.validate_job({"Job": job("py-svc")}).json()
check("a valid job validates", valid["Error"] == "" and valid["DriverConfigValidated"], valid)
invalid = n.validate.validate_job({"Job": job("py-svc", TaskGroups=[])}).json()
check("an invalid job's problems are answered", "group" in invalid["Error"] and invalid["ValidationErrors"], invalid)
raises("validating registered nothing", exc.URLNotFoundNomadException, lambda: n.job.get_job("py-svc"))

# Register, then plan a change: the plan names it and changes nothing.
reg = n.jobs.register_job({"Job": job("py-svc")})
completed(reg["EvalID"])
current = n.job.get_job("py-svc")
plan = n.job.plan_job("py-svc", {"Job": dict(current, Meta={"rev": "2"})}, diff=True)
check("a plan of an edited spec says so", plan["Diff"]["Type"] == "Edited", plan)
check("a plan annotates the group", "g" in plan["Annotations"]["DesiredTGUpdates"], plan)
check("a plan registers nothing", n.job.get_job("py-svc")["Version"] == 0)

# Evaluate: a fresh evaluation of the same spec.
ev = n.job.evaluate_job("py-svc")
check("evaluate answers a new eval", len(ev["EvalID"]) == 36 and ev["EvalID"] != reg["EvalID"], ev)
completed(ev["EvalID"])

# Scale (python-nomad has no call for it: a raw POST, as the Nomad CLI sends it).
scaled = n.job.request("py-svc", "scale", method="post", json={"Count": 3, "Target": {"Group": "g"}}).json()
check("scale answers an eval", len(scaled["EvalID"]) == 36, scaled)
completed(scaled["EvalID"])
check("the group is scaled", n.job.get_job("py-svc")["TaskGroups"][0]["Count"] == 3)
summary = n.job.get_summary("py-svc")
check("the summary counts the group", "g" in summary["Summary"], summary)

# Versions and revert.
versions = [v["Version"] for v in n.job.get_versions("py-svc")["Versions"]]
check("versions are listed newest first", versions[:2] == [1, 0], versions)
reverted = n.job.revert_job("py-svc", 0)
completed(reverted["EvalID"])
back = n.job.get_job("py-svc")
check("revert registers version 0's spec again", back["TaskGroups"][0]["Count"] == 1 and back["Version"] == 2, back)
raises("revert to a version that never was is refused", exc.BadRequestNomadException, lambda: n.job.revert_job("py-svc", 9))

# Periodic force launches a child now.
periodic = job("py-nightly", "batch", Periodic={"Enabled": True, "Spec": "30 2 * * *", "SpecType": "cron"})
n.jobs.register_job({"Job": periodic})
forced = n.job.periodic_job("py-nightly")
check("periodic force answers an eval", len(forced["EvalID"]) == 36, forced)
raises("a job that is not periodic cannot be forced", exc.BadRequestNomadException, lambda: n.job.periodic_job("py-svc"))

# Dispatch a parameterized job.
param = job("py-param", "batch", ParameterizedJob={"MetaOptional": ["who"]})
n.jobs.register_job({"Job": param})
dispatched = n.job.dispatch_job("py-param", meta={"who": "python"})
check(
    "dispatch answers the child job",
    dispatched["DispatchedJobID"].startswith("py-param/dispatch-") and len(dispatched["EvalID"]) == 36,
    dispatched,
)
child = n.job.get_job(dispatched["DispatchedJobID"])
check("the child reads back by its id, slash and all", child["Meta"]["who"] == "python", child)
check("so do its allocations", isinstance(n.job.get_allocations(dispatched["DispatchedJobID"]), list))

# An allocation on the real agent: restart in place, then stop.
n.jobs.register_job({"Job": job("py-agent")})
running = eventually(
    "an allocation of py-agent to run",
    lambda: [a for a in n.job.get_allocations("py-agent") if a["ClientStatus"] == "running"],
)
alloc = running[0]["ID"]
restarted = n.client.allocation.restart_allocation(alloc)
check("restart answers the restarted task", restarted.get("Tasks") == ["t"], restarted)
stopped = n.allocation.stop_allocation(alloc)
check("stop answers an eval", len(stopped["EvalID"]) == 36, stopped)
completed(stopped["EvalID"])
check(
    "the stopped allocation is replaced",
    eventually(
        "a replacement allocation",
        lambda: [a for a in n.job.get_allocations("py-agent") if a["ID"] != alloc],
    ),
)

# The cluster reads.
leader = n.status.leader.get_leader()
check("a leader is named", ":" in leader, leader)
check("the peers include the leader", leader in n.status.peers.get_peers())
me = n.agent.get_agent()
check("agent/self names a server", me["config"]["Server"]["Enabled"] is True, me)
members = n.agent.get_members()
check("agent/members lists the server", len(members["Members"]) == 1, members)
raft = n.operator.get_configuration()
check("the raft configuration has a leader", any(s["Leader"] for s in raft["Servers"]), raft)
found = n.search.search("py-", "jobs")
check("prefix search finds the jobs", "py-svc" in found["Matches"]["jobs"], found)
fuzzy = n.search.fuzzy_search("py-s", "jobs")
check(
    "fuzzy search scopes them by namespace",
    {"ID": "py-svc", "Scope": ["default"]} in fuzzy["Matches"]["jobs"],
    fuzzy,
)

for id_ in ["py-svc", "py-nightly", "py-param", "py-agent"]:
    n.job.deregister_job(id_, purge=True)
check("every job is purged", [j for j in n.jobs.get_jobs() if not j["ParentID"]] == [], n.jobs.get_jobs())

finish()
