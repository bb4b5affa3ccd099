# A batch job: ten workers that each do a bit of work and exit.
job "report" {
  type = "batch"

  group "workers" {
    count = 10

    reschedule {
      attempts       = 2
      interval       = "1h"
      delay          = "30s"
      delay_function = "constant"
      unlimited      = false
    }

    task "crunch" {
      driver = "raw_exec"

      config {
        command = "/bin/sh"
        args    = ["-c", "echo crunching part $NOMAD_ALLOC_INDEX; sleep 20; echo done"]
      }

      resources {
        cpu    = 100
        memory = 64
      }
    }
  }
}
