# One task that prints a line and stays up: the README's TLS walkthrough reads its logs.
job "hello" {
  datacenters = ["dc1"]

  group "hello" {
    task "hello" {
      driver = "raw_exec"

      config {
        command = "/bin/sh"
        args    = ["-c", "echo hello from $NOMAD_ALLOC_ID; exec sleep 3600"]
      }

      resources {
        cpu    = 50
        memory = 32
      }
    }
  }
}
