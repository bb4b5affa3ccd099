# A sysbatch job: run a short clean-up once on every node, then finish.
job "tmp-cleanup" {
  type        = "sysbatch"
  datacenters = ["*"]

  group "cleanup" {
    task "sweep" {
      driver = "raw_exec"

      config {
        command = "/bin/sh"
        args    = ["-c", "echo sweeping ${NOMAD_ALLOC_DIR}/tmp; sleep 2"]
      }

      resources {
        cpu    = 50
        memory = 16
      }
    }
  }
}
