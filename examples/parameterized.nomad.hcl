# A job launched only by `drover job dispatch`, which must pass the input file's name.
job "transcode" {
  type = "batch"

  parameterized {
    payload       = "optional"
    meta_required = ["input"]
    meta_optional = ["quality"]
  }

  group "transcode" {
    task "ffmpeg-stand-in" {
      driver = "raw_exec"

      config {
        command = "/bin/sh"
        args    = ["-c", "echo transcoding ${NOMAD_META_input} at ${NOMAD_META_quality}; sleep 5"]
      }

      resources {
        cpu    = 200
        memory = 128
      }
    }
  }
}
