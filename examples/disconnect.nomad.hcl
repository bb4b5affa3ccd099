# A service that rides out short network partitions: while its node is disconnected for
# up to 10 minutes the allocation is "unknown" instead of lost, and when the node comes
# back the original is kept.
job "edge-cache" {
  type = "service"

  group "cache" {
    count = 2

    disconnect {
      lost_after = "10m"
      replace    = true
      reconcile  = "keep_original"
    }

    task "cache" {
      driver = "raw_exec"

      config {
        command = "/bin/sleep"
        args    = ["3600"]
      }

      resources {
        cpu    = 100
        memory = 64
      }
    }
  }
}
