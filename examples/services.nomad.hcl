# Two groups in drover's own service catalog (`drover service list`): `db` offers a TCP
# service whose check restarts its task after two failures in a row, `web` two copies of
# an HTTP service with an http check. A task's template finds a service with
# `{{ range nomadService "shop-db" }}{{ .Address }}:{{ .Port }}{{ end }}`.
job "shop" {
  datacenters = ["dc1"]

  group "db" {
    network {
      port "db" {}
    }

    service {
      name     = "${NOMAD_JOB_NAME}-db"
      port     = "db"
      provider = "nomad"
      tags     = ["primary"]

      check {
        type     = "tcp"
        interval = "2s"
        timeout  = "1s"

        check_restart {
          limit = 2
          grace = "2s"
        }
      }
    }

    task "db" {
      driver = "raw_exec"
      config {
        command = "python3"
        args    = ["-m", "http.server", "--bind", "${NOMAD_IP_db}", "${NOMAD_PORT_db}"]
      }
    }
  }

  group "web" {
    count = 2

    network {
      port "http" {}
    }

    task "web" {
      driver = "raw_exec"
      config {
        command = "python3"
        args    = ["-m", "http.server", "--bind", "${NOMAD_IP_http}", "${NOMAD_PORT_http}"]
      }

      service {
        name = "web"
        port = "http"

        check {
          type     = "http"
          path     = "/"
          interval = "2s"
          timeout  = "1s"
        }
      }
    }
  }
}
