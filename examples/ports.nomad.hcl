# A service that can be reached: three copies of a small HTTP server, each on a port the
# scheduler picks on its node. `drover alloc status` prints each copy's address.
job "hello-http" {
  datacenters = ["dc1"]
  type        = "service"

  group "web" {
    count = 3

    network {
      mode = "host"
      # No `static`: a dynamic port from the node's range (20000-32000 by default).
      port "http" {}
    }

    task "server" {
      driver = "raw_exec"

      config {
        command = "/usr/bin/python3"
        # The agent puts the port and address in the task's environment and interpolates
        # them here.
        args = ["-m", "http.server", "${NOMAD_PORT_http}", "--bind", "${NOMAD_IP_http}"]
      }

      resources {
        cpu    = 100
        memory = 64
      }
    }
  }
}
