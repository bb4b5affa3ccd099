# Written exactly as for Nomad: this file runs unchanged on a Nomad cluster with the
# raw_exec driver enabled, and on drover.
job "hello" {
  region      = "global"
  datacenters = ["dc1"]
  type        = "service"

  group "hello" {
    count = 1

    max_client_disconnect = "5m"

    restart {
      attempts = 2
      interval = "30m"
      delay    = "15s"
      mode     = "fail"
    }

    task "hello" {
      driver = "raw_exec"

      config {
        command = "/bin/sh"
        args = [
          "-c",
          "while true; do echo \"hello from ${NOMAD_ALLOC_ID} in ${NOMAD_TASK_DIR}\"; sleep 10; done",
        ]
      }

      env {
        GREETING = "hello"
      }

      resources {
        cpu    = 100 # MHz
        memory = 64  # MB
      }

      kill_timeout = "20s"
    }
  }
}
