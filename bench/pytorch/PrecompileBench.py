"""Precompile's parallel efficiency and collection mode's per-step cost.

    PYTHONPATH=build/python /usr/bin/python3 bench/pytorch/PrecompileBench.py --bin build/bin

1. Collects 8 distinct BERT-style training-step graphs (different sequence
   lengths and batch sizes), then compiles them with `kiln precompile
   --command compile` at -j1 and at -jN (N = cores) into fresh caches, and
   prints the speed-up and the parallel efficiency (speed-up / N; the goal
   is at least 90 %).
2. Times a step call in collection mode (record nothing new, return zeros)
   against the same step running on the simulator, after the first call.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "test", "e2e", "pytorch"))
import models  # noqa: E402

COLLECT = """
import sys, torch, torch.nn.functional as F, kiln
sys.path.insert(0, {models!r})
import models
torch.manual_seed(0)
for seq, batch in [(32, 4), (32, 8), (64, 4), (64, 8), (96, 4), (96, 8), (128, 4), (128, 8)]:
    model = models.BertClassifier(hidden=256, seq=seq)
    step = kiln.compile_step(model, F.cross_entropy, kiln.optim.AdamW(lr=1e-3),
                             name=f"bert-s{{seq}}-b{{batch}}")
    step(torch.randint(0, 100, (batch, seq)), torch.randint(0, 3, (batch,)))
"""


def precompile(kiln, args, env):
    start = time.perf_counter()
    subprocess.run([kiln, "precompile", "--no-progress", *args], env=env, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def parallel_efficiency(kiln, jobs):
    work = tempfile.mkdtemp()
    try:
        graphs = os.path.join(work, "graphs")
        env = dict(os.environ, OMP_NUM_THREADS="1")
        models_dir = os.path.dirname(models.__file__)
        precompile(kiln, ["--cache", os.path.join(work, "c0"), "--graphs", graphs,
                          "--command", "collect", "--", sys.executable, "-c",
                          COLLECT.format(models=models_dir)], env)
        count = len([f for f in os.listdir(graphs) if f.endswith(".kgraph.pb")])
        serial = precompile(kiln, ["--cache", os.path.join(work, "c1"), "--graphs", graphs,
                                   "--command", "compile", "-j1"], env)
        parallel = precompile(kiln, ["--cache", os.path.join(work, "c2"), "--graphs", graphs,
                                     "--command", "compile", f"-j{jobs}"], env)
        speedup = serial / parallel
        print(f"precompile: {count} graphs, -j1 {serial:.2f} s, -j{jobs} {parallel:.2f} s, "
              f"speed-up {speedup:.2f}x, parallel efficiency {100 * speedup / jobs:.1f}% "
              f"(goal >= 90%)")
    finally:
        shutil.rmtree(work)


def collection_overhead(steps):
    import kiln
    work = tempfile.mkdtemp()
    try:
        os.environ["KILN_CACHE_URL"] = os.path.join(work, "cache")
        timings = {}
        for mode in ("collect", "run"):
            if mode == "collect":
                os.environ["KILN_EXTRACT_GRAPHS_ONLY"] = "1"
                os.environ["KILN_GRAPHS_DIR"] = os.path.join(work, "graphs")
            else:
                os.environ.pop("KILN_EXTRACT_GRAPHS_ONLY", None)
            torch.manual_seed(0)
            step = kiln.compile_step(models.BertClassifier(), F.cross_entropy,
                                     kiln.optim.AdamW(lr=1e-3))
            x, y = torch.randint(0, 100, (4, 16)), torch.randint(0, 3, (4,))
            first = time.perf_counter()
            step(x, y)
            first = time.perf_counter() - first
            start = time.perf_counter()
            for _ in range(steps):
                step(x, y)
            timings[mode] = (first, (time.perf_counter() - start) / steps)
        (ct, cs), (rt, rs) = timings["collect"], timings["run"]
        print(f"collection mode: first call (trace + record) {ct * 1e3:.1f} ms, "
              f"then {cs * 1e6:.0f} us per step; running on the simulator: first call "
              f"(trace + compile) {rt * 1e3:.1f} ms, then {rs * 1e3:.2f} ms per step "
              f"({rs / cs:.0f}x the collection step)")
    finally:
        shutil.rmtree(work)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", default="build/bin")
    parser.add_argument("--jobs", type=int, default=os.cpu_count())
    parser.add_argument("--steps", type=int, default=50)
    args = parser.parse_args()
    parallel_efficiency(os.path.join(args.bin, "kiln"), args.jobs)
    collection_overhead(args.steps)


if __name__ == "__main__":
    main()
