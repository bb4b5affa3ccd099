# Build steps that run from a snapshot (artifact): drover prefers nodes that last ran the
# same snapshot, so their inputs are already warm.
job "build" {
  type = "batch"

  group "compile" {
    count = 4

    task "compile" {
      driver   = "raw_exec"
      snapshot = "toolchain-2026-11-01"

      config {
        command = "/bin/sh"
        args    = ["-c", "echo compiling shard $NOMAD_ALLOC_INDEX; sleep 15"]
      }

      resources {
        cpu    = 500
        memory = 256
        disk   = 1024
      }
    }
  }
}
