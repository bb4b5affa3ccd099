# Task blocks around a main task: a prestart hook that prepares the allocation's shared
# dir, the main task as an unprivileged user with its own restart policy and stop signal,
# a poststop hook, and scratch disk for the group.
job "hooks" {
  type = "batch"

  group "pipeline" {
    ephemeral_disk {
      size = 200
    }

    task "fetch" {
      driver = "raw_exec"

      lifecycle {
        hook = "prestart"
      }

      config {
        command = "/bin/sh"
        args    = ["-c", "echo input > ${NOMAD_ALLOC_DIR}/input; chmod 644 ${NOMAD_ALLOC_DIR}/input"]
      }
    }

    task "work" {
      driver      = "exec"
      user        = "nobody"
      kill_signal = "SIGINT"

      restart {
        attempts = 1
        delay    = "5s"
      }

      config {
        command = "/bin/sh"
        args    = ["-c", "cat /alloc/input; echo worked"]
      }

      resources {
        cpu    = 100
        memory = 64
      }
    }

    task "report" {
      driver = "raw_exec"

      lifecycle {
        hook = "poststop"
      }

      config {
        command = "/bin/echo"
        args    = ["done"]
      }
    }
  }
}
