# A system job: one log shipper on every Linux node, rolled out five nodes at a time.
job "log-shipper" {
  type = "system"

  constraint {
    attribute = "${attr.kernel.name}"
    value     = "linux"
  }

  update {
    max_parallel = 5
    stagger      = "10s"
  }

  group "shipper" {
    task "ship" {
      driver = "raw_exec"

      config {
        command = "/bin/sh"
        args    = ["-c", "while true; do echo shipping logs of ${NOMAD_TASK_DIR}; sleep 30; done"]
      }

      resources {
        cpu    = 50
        memory = 32
      }
    }
  }
}
