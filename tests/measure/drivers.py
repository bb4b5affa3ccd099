#!/usr/bin/env python3
"""Task start latency per driver and the agent's overhead per running task.

Starts a `drover server` and a `drover agent --raw-exec` (the release binary given as the
first argument, default target/release/drover) on loopback with temporary data dirs, then
for each driver runs a service job of N sleeping tasks and reports:

- start latency: per task, the agent's "Received" event to its "Started" event (directory,
  cgroup and limits, the shim, namespaces and mounts for exec, the exec itself);
- the agent's RSS and CPU with N tasks running, against the same agent idle, over a
  measuring window; and the task shims' PSS per task (exec keeps two small processes per
  task: the stage that waits and the namespace's init).

For `docker` the tasks are containers of an image imported from busybox-static's binary
(`docker import`, no registry), with `network_mode = "none"`; start latency then covers
creating and starting the container through the engine, and the engine's own processes
(containerd-shim per container) are reported instead of the drover shims.

Usage: python3 tests/measure/drivers.py [DROVER] [N] [WINDOW_SECONDS] [DRIVER...]
Run as root (exec needs it; docker needs a running dockerd). The machine should be
otherwise idle.
"""

import json, os, shutil, signal, statistics, subprocess, sys, tempfile, time

IMAGE = "drover-bench/busybox:1"

DROVER = sys.argv[1] if len(sys.argv) > 1 else "target/release/drover"
N = int(sys.argv[2]) if len(sys.argv) > 2 else 100
WINDOW = float(sys.argv[3]) if len(sys.argv) > 3 else 30.0
PORT = 24647
ADDR = f"http://127.0.0.1:{PORT}"
TICK = os.sysconf("SC_CLK_TCK")


def drover(*args):
    env = dict(os.environ, DROVER_ADDR=ADDR)
    return subprocess.run([DROVER, *args], env=env, capture_output=True, text=True, check=True)


def proc_cpu_seconds(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def proc_rss_mib(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def shim_pss_mib(marker=b"__drover-task-"):
    total = 0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = open(f"/proc/{pid}/cmdline", "rb").read()
            if marker not in cmd:
                continue
            for line in open(f"/proc/{pid}/smaps_rollup"):
                if line.startswith("Pss:"):
                    total += int(line.split()[1])
        except OSError:
            pass
    return total / 1024


def window(pid):
    cpu0, t0 = proc_cpu_seconds(pid), time.time()
    time.sleep(WINDOW)
    cpu1, t1 = proc_cpu_seconds(pid), time.time()
    return 100.0 * (cpu1 - cpu0) / (t1 - t0), proc_rss_mib(pid)


def docker_image(dir):
    """Imports IMAGE (busybox-static's binary and its applet links) into the engine."""
    rootfs = os.path.join(dir, "rootfs")
    os.makedirs(os.path.join(rootfs, "bin"))
    shutil.copy("/bin/busybox", os.path.join(rootfs, "bin", "busybox"))
    for applet in ["sh", "sleep"]:
        os.symlink("busybox", os.path.join(rootfs, "bin", applet))
    tar = os.path.join(dir, "rootfs.tar")
    subprocess.run(["tar", "-C", rootfs, "-cf", tar, "bin"], check=True)
    subprocess.run(["docker", "import", tar, IMAGE], check=True, capture_output=True)


def job_file(dir, driver):
    path = os.path.join(dir, f"bench-{driver}.hcl")
    config = f'image = "{IMAGE}"\n        network_mode = "none"\n        ' if driver == "docker" else ""
    command = "sleep" if driver == "docker" else "/bin/sleep"
    open(path, "w").write(f"""
job "bench-{driver.replace('_', '-')}" {{
  group "g" {{
    count = {N}
    task "sleep" {{
      driver = "{driver}"
      config {{
        {config}command = "{command}"
        args    = ["3600"]
      }}
      resources {{
        cpu    = 10
        memory = 16
      }}
    }}
  }}
}}
""")
    return path


def wait_running(job_id):
    deadline = time.time() + 120
    while time.time() < deadline:
        view = json.loads(drover("job", "status", "-json", job_id).stdout)
        allocs = view["allocations"]
        running = [a for a in allocs if a["client_status"] == "Running"]
        if len(running) >= N:
            return running
        time.sleep(1)
    sample = allocs[0] if allocs else view
    raise SystemExit(f"{job_id}: not all {N} running after 120 s; one: {json.dumps(sample)[:3000]}")


def latencies(allocs):
    out = []
    for a in allocs:
        for state in a["task_states"].values():
            times = {e["kind"]: e["time"] for e in state["events"]}
            if "Received" in times and "Started" in times:
                out.append(times["Started"] - times["Received"])
    return sorted(out)


def main():
    root = tempfile.mkdtemp(prefix="drover-drivers-")
    os.chmod(root, 0o755)
    server = subprocess.Popen(
        [DROVER, "server", "--data-dir", f"{root}/server", "--bind", f"127.0.0.1:{PORT}", "--no-metrics"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(3)
    agent = subprocess.Popen(
        [DROVER, "agent", "--raw-exec", "--servers", ADDR, "--data-dir", f"{root}/agent", "--name", "bench-agent"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(5)
        idle_cpu, idle_rss = window(agent.pid)
        print(f"agent idle: {idle_rss:.1f} MiB RSS, {idle_cpu:.2f}% of a core")
        drivers = sys.argv[4:] or ["raw_exec", "exec"]
        if "docker" in drivers:
            docker_image(root)
        for driver in drivers:
            marker = b"containerd-shim" if driver == "docker" else b"__drover-task-"
            job_id = f"bench-{driver.replace('_', '-')}"
            drover("job", "run", "-detach", job_file(root, driver))
            allocs = wait_running(job_id)
            ms = latencies(allocs)
            time.sleep(5)
            cpu, rss = window(agent.pid)
            shims = shim_pss_mib(marker)
            print(f"{driver}: start latency ms p50 {statistics.median(ms):.0f} "
                  f"p90 {ms[int(len(ms) * 0.9) - 1]} max {ms[-1]} (n={len(ms)}); "
                  f"agent with {N} tasks: {rss:.1f} MiB RSS (+{(rss - idle_rss) * 1024 / N:.0f} KiB/task), "
                  f"{cpu:.2f}% of a core; shims' PSS {shims:.1f} MiB ({shims * 1024 / N:.0f} KiB/task)")
            drover("job", "stop", "-detach", job_id)
            deadline = time.time() + 120
            while time.time() < deadline and shim_pss_mib(marker) > 0:
                time.sleep(1)
            time.sleep(3)
    finally:
        agent.send_signal(signal.SIGINT)
        server.send_signal(signal.SIGINT)
        agent.wait(30)
        server.wait(30)
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
