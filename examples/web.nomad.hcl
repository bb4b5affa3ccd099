# A long-running service: three copies of a small HTTP-ish loop, rolled out two at a time.
job "web" {
  datacenters = ["dc1", "dc2"]
  type        = "service"
  priority    = 60

  meta {
    team = "frontend"
  }

  update {
    max_parallel = 2
    stagger      = "15s"
  }

  group "frontend" {
    count = 3

    # A node drain moves one allocation at a time, each replacement running 5 s first.
    migrate {
      max_parallel     = 1
      health_check     = "task_states"
      min_healthy_time = "5s"
      healthy_deadline = "2m"
    }

    restart {
      attempts = 3
      interval = "5m"
      delay    = "10s"
      mode     = "delay"
    }

    task "server" {
      driver = "raw_exec"

      config {
        command = "/bin/sh"
        args    = ["-c", "while true; do echo serving from $NOMAD_ALLOC_ID; sleep 5; done"]
      }

      env {
        LISTEN_PORT = "8080"
        LOG_DIR     = "${NOMAD_ALLOC_DIR}/logs"
      }

      resources {
        cpu    = 200
        memory = 128
      }

      kill_timeout = "10s"
    }
  }
}
