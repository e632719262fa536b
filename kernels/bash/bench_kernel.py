#!/usr/bin/env python3
"""Interleaved A/B of bash kernel drivers over the kernel protocol, with test_kernel.py's Kernel
(requests as the agent sends them; with ":fp" the harness plays the agent's part of the state
fingerprint, as the agent does, else the driver decides "changed" itself).

    python3 kernels/bash/bench_kernel.py N SETUP KERNEL[:fp] KERNEL[:fp] ...
    python3 kernels/bash/bench_kernel.py 400 'a=(1 2 3); f() { :; }' /tmp/old/kernel.bash $PWD/kernels/bash/kernel.bash:fp

Each driver runs SETUP, 20 untimed executions, then N timed ones of CODE (env, default `x=1`),
the drivers taking turns (A B, then B A). Prints p50/p90 of the round trip and the CPU of the
driver's bash per execution (/proc/PID/schedstat). SNAP=1 takes a snapshot after each execution
that changed the state. Kernel paths must be absolute (the driver runs in its own directory).
"""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_kernel as tk  # noqa: E402


def cpu_ns(pid):
    with open("/proc/%d/schedstat" % pid) as f:
        return int(f.read().split()[0])


def main():
    code = os.environ.get("CODE", "x=1")
    snap = os.environ.get("SNAP") == "1"
    n, setup, specs = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
    ks = []
    for spec in specs:
        path, _, mode = spec.partition(":")
        tk.KERNEL = path
        k = tk.Kernel(fingerprint=(mode == "fp"))
        if setup:
            _, err, d = k.exec(setup)
            assert d["status"] == "ok", (err, d)
        for _ in range(20):
            k.exec(code)
        ks.append(k)
    lat = [[] for _ in ks]
    cpu = [0] * len(ks)
    changed = [0] * len(ks)
    order = list(range(len(ks)))
    for i in range(n):
        for j in order if i % 2 == 0 else order[::-1]:
            k = ks[j]
            c0 = cpu_ns(k.p.pid)
            t0 = time.perf_counter()
            _, _, d = k.exec(code)
            if d["changed"] and snap:
                k.snapshot()
            lat[j].append(time.perf_counter() - t0)
            cpu[j] += cpu_ns(k.p.pid) - c0
            changed[j] += d["changed"]
    for j, spec in enumerate(specs):
        s = sorted(lat[j])
        print("%-50s p50 %.3f ms  p90 %.3f ms  cpu %.3f ms/exec  changed %d/%d"
              % (spec, s[len(s) // 2] * 1e3, s[int(len(s) * 0.9)] * 1e3, cpu[j] / n / 1e6, changed[j], n))
    for k in ks:
        k.close()


if __name__ == "__main__":
    main()
