"""python-nomad against `drover server --acl`: bootstrap, policies, tokens, and what each
token may do."""

from harness import check, client, finish, raises
import nomad

exc = nomad.api.exceptions
anon = client()

raises("no token is refused", exc.URLNotAuthorizedNomadException, lambda: anon.jobs.get_jobs())
boot = anon.acl.generate_bootstrap()
check("bootstrap answers a management token", boot["Type"] == "management", boot)
mgmt = client(boot["SecretID"])
raises("a second bootstrap is refused", exc.BaseNomadException, lambda: anon.acl.generate_bootstrap())
raises("an unknown token is refused", exc.URLNotAuthorizedNomadException, lambda: client("not-a-token").jobs.get_jobs())

rules = 'namespace "*" { policy = "read" }\nnode { policy = "read" }\n'
mgmt.acl.create_policy("readonly", {"Name": "readonly", "Description": "reads", "Rules": rules})
check("the policy reads back", mgmt.acl.get_policy("readonly")["Rules"] == rules)
check("policies are listed", any(p["Name"] == "readonly" for p in mgmt.acl.get_policies()))
token = mgmt.acl.create_token({"Name": "ro", "Type": "client", "Policies": ["readonly"]})
check("a client token is made", token["Policies"] == ["readonly"] and token["SecretID"], token)
ro = client(token["SecretID"])
check("the token knows itself", ro.acl.get_self_token()["AccessorID"] == token["AccessorID"])
raises("a read-only token may not list tokens", exc.URLNotAuthorizedNomadException, lambda: ro.acl.get_tokens())

JOB = {
    "ID": "acl-batch",
    "Type": "batch",
    "TaskGroups": [
        {
            "Name": "g",
            "Tasks": [
                {
                    "Name": "t",
                    "Driver": "raw_exec",
                    "Config": {"command": "/bin/true"},
                    "Resources": {"CPU": 50, "MemoryMB": 32},
                }
            ],
        }
    ],
}
raises("a read-only token may not register", exc.URLNotAuthorizedNomadException, lambda: ro.jobs.register_job({"Job": JOB}))
reg = mgmt.jobs.register_job({"Job": JOB})
check("management registers", len(reg["EvalID"]) == 36, reg)
check("a read-only token lists jobs", [j["ID"] for j in ro.jobs.get_jobs()] == ["acl-batch"])
check("a read-only token reads the job", ro.job.get_job("acl-batch")["Type"] == "batch")
check("a read-only token lists nodes", ro.nodes.get_nodes() == [])
raises("a read-only token may not stop the job", exc.URLNotAuthorizedNomadException, lambda: ro.job.deregister_job("acl-batch"))
raises("a call without a token may not list deployments", exc.URLNotAuthorizedNomadException, lambda: anon.deployments.get_deployments())
check("a read-only token lists deployments (a batch job has none)", ro.deployments.get_deployments() == [])
check("a read-only token reads the job's latest deployment", ro.job.get_deployment("acl-batch") is None)
raises(
    "a read-only token may not fail a deployment",
    exc.URLNotAuthorizedNomadException,
    lambda: ro.deployment.fail_deployment("0123abcd-0000-4000-8000-000000000000"),
)
raises(
    "management fails no deployment that does not exist",
    exc.URLNotFoundNomadException,
    lambda: mgmt.deployment.fail_deployment("0123abcd-0000-4000-8000-000000000000"),
)
mgmt.job.deregister_job("acl-batch", purge=True)
raises("the purged job is gone", exc.URLNotFoundNomadException, lambda: mgmt.job.get_job("acl-batch"))
check("the token is deleted", mgmt.acl.delete_token(token["AccessorID"]))
raises("a deleted token is refused", exc.URLNotAuthorizedNomadException, lambda: ro.jobs.get_jobs())

finish()
