# A nightly job: launched at 02:30 Berlin time, never two at once.
job "nightly-backup" {
  type = "batch"

  periodic {
    cron             = "30 2 * * *"
    time_zone        = "Europe/Berlin"
    prohibit_overlap = true
  }

  group "backup" {
    task "dump" {
      driver = "raw_exec"

      config {
        command = "/bin/sh"
        args    = ["-c", "echo backing up at $(date); sleep 10"]
      }

      resources {
        cpu    = 100
        memory = 64
      }
    }
  }
}
