"""Data-parallel training end to end: torchrun (kiln.torchrun) workers
rendezvous, all-reduce their gradients through Gloo inside the compiled
step, checkpoint, survive a worker killed with -9, write metrics, and find
their graphs in a cache that `kiln precompile` filled."""

import glob
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
KILN = os.path.join(os.environ["KILN_BIN"], "kiln")
WORKER = os.path.join(HERE, "train_dp.py")

import kiln  # noqa: E402  (PYTHONPATH is set by ctest)
from kiln.metrics import read_events  # noqa: E402


def free_port():
    # A port below the kernel's ephemeral range (32768 up by default): an
    # ephemeral one, free when asked for, can be taken before rank 0 binds
    # it by the outgoing connections of tests running alongside (a CI run
    # failed so: "Address already in use").
    rng = random.Random(os.getpid() ^ time.monotonic_ns())
    for _ in range(200):
        port = rng.randrange(20000, 32768)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port in 20000-32767")


def load(path):
    with open(path) as f:
        return json.load(f)


class DistributedTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()
        self.cache = os.path.join(self.dir, "cache")
        self.env = dict(os.environ, KILN_CACHE_URL=self.cache, KILN_COMM_TIMEOUT="60",
                        PYTHONPATH=os.pathsep.join([HERE] + sys.path))
        for name in ("KILN_EXTRACT_GRAPHS_ONLY", "RANK", "WORLD_SIZE", "MASTER_ADDR",
                     "MASTER_PORT", "KILN_RENDEZVOUS"):
            self.env.pop(name, None)

    def tearDown(self):
        shutil.rmtree(self.dir)

    def path(self, name):
        return os.path.join(self.dir, name)

    def torchrun(self, nproc, *args, extra=(), env=None):
        return [sys.executable, "-m", "kiln.torchrun", "--nproc_per_node", str(nproc),
                "--master_port", str(free_port()), *extra, WORKER, *args]

    def run_ok(self, command, env=None, timeout=300):
        out = subprocess.run(command, env=env or self.env, cwd=HERE, capture_output=True,
                             text=True, timeout=timeout)
        if out.returncode != 0:
            self.fail(f"{' '.join(command)} failed ({out.returncode}):\n"
                      f"{out.stdout[-3000:]}{out.stderr[-3000:]}")
        return out

    def train(self, nproc, batch, out, *args, extra=()):
        self.run_ok(self.torchrun(nproc, "--batch", str(batch), "--out", self.path(out),
                                  *args, extra=extra))
        return load(self.path(out))

    def train_every_rank(self, name, *args, env=None):
        """4 workers of batch 8; every rank's results, in rank order."""
        out = self.path(name + "-{rank}.json")
        self.run_ok(self.torchrun(4, "--batch", "8", "--out", out, *args), env=env)
        return [load(out.format(rank=r)) for r in range(4)]

    def assertTracks(self, one, four, rtol):
        """Four workers' losses against one worker's with 4 times the batch,
        step by step, and a model that learned."""
        self.assertEqual(len(four), 20)
        for step, (a, b) in enumerate(zip(one, four), 1):
            self.assertLess(abs(a - b) / abs(a), rtol, f"step {step}: {a} vs {b}")
        self.assertLess(four[-1], four[0] - 0.3, "the model did not learn")

    def test_four_workers_match_one_worker_with_four_times_the_batch(self):
        one = self.train(1, 32, "one.json")
        four = self.train(4, 8, "four.json")
        self.assertEqual(len(one["losses"]), 20)
        for step, (a, b) in enumerate(zip(one["losses"], four["losses"]), 1):
            self.assertLess(abs(a - b) / abs(a), 1e-5, f"step {step}: {a} vs {b}")
        self.assertLess(four["losses"][-1], four["losses"][0] - 0.3, "the model did not learn")
        # A fixed world size repeats bit for bit.
        again = self.train(4, 8, "again.json")
        self.assertEqual(four["losses"], again["losses"])
        self.assertEqual(four["checksum"], again["checksum"])

    def test_cnn_batch_norm_statistics_are_per_worker(self):
        # Four workers of the small CNN against eager DDP without
        # SyncBatchNorm (train_cnn_dp.py): per-shard batch statistics,
        # averaged gradients, rank 0's running statistics.
        out = self.path("cnn.json")
        self.run_ok([sys.executable, "-m", "kiln.torchrun", "--nproc_per_node", "4",
                     os.path.join(HERE, "train_cnn_dp.py"), "--out", out])
        result = load(out)
        self.assertEqual(result["world"], 4)
        for i, (a, b) in enumerate(zip(result["compiled"], result["eager"])):
            self.assertLess(abs(a - b) / abs(b), 1e-4, f"step {i}: {a} vs {b}")
        for name, difference in result["difference"].items():
            self.assertLess(difference, 1e-4, name)
        self.assertIn("stem.1.running_var", result["difference"])

    def recipe(self, *args):
        out = self.path("recipe.json")
        self.run_ok([sys.executable, "-m", "kiln.torchrun", "--nproc_per_node", "4",
                     "--master_port", str(free_port()),
                     os.path.join(HERE, "train_recipes_dp.py"), "--out", out, *args])
        result = load(out)
        self.assertEqual(result["world"], 4)
        self.assertEqual(result["graphs"], 2, "accumulate and update graphs")
        for i, (a, b) in enumerate(zip(result["compiled"], result["eager"])):
            self.assertLess(abs(a - b) / abs(b), 1e-5, f"micro-batch {i}: {a} vs {b}")
        self.assertLess(result["difference"], 1e-5)

    def test_accumulation_and_clipping_match_eager_ddp_with_no_sync(self):
        self.recipe("--accumulate", "2", "--max-norm", "0.5")

    def test_lamb_with_accumulation_matches_eager_ddp(self):
        self.recipe("--accumulate", "3", "--max-norm", "1.0", "--lamb")

    def zero(self, nproc, name, *args):
        out = self.path(name + ".json")
        self.run_ok([sys.executable, "-m", "kiln.torchrun", "--nproc_per_node", str(nproc),
                     "--master_port", str(free_port()),
                     os.path.join(HERE, "train_zero_dp.py"), "--out", out, *args])
        result = load(out)
        self.assertEqual(result["world"], nproc)
        for i, (a, b) in enumerate(zip(result["sharded"], result["whole"])):
            self.assertLess(abs(a - b) / abs(b), 1e-6, f"micro-batch {i}: {a} vs {b}")
        self.assertLess(result["difference"], 1e-5, "gathered optimizer state")
        return result

    def test_zero1_matches_data_parallel_saves_state_and_resumes_on_fewer_workers(self):
        # ZeRO-1 against plain data parallelism, 4 workers, 20 updates of 2
        # micro-batches with clipping (train_zero_dp.py trains both).
        checkpoint = self.path("zero.pt")
        four = self.zero(4, "four", "--save-at", "10", "--checkpoint", checkpoint)
        self.assertEqual(len(four["sharded"]), 40)
        self.assertLess(sum(four["sharded"][-4:]), sum(four["sharded"][:4]) - 0.8,
                        "the model did not learn")
        hbm, state = four["hbm"], four["optimizer_state_bytes"]
        saved = hbm["whole"] - hbm["sharded"]
        print(f"\nZeRO-1 over 4 workers: HBM plan {hbm['sharded']} bytes a worker "
              f"against {hbm['whole']}: {saved} fewer; 3/4 of the optimizer "
              f"state is {0.75 * state:.0f}", file=sys.stderr)
        self.assertGreater(saved, 0.95 * 0.75 * state)
        # Saved by 4 workers (whole tensors), resumed by 2: the sharded step
        # continues as a plain data-parallel one from the same checkpoint.
        two = self.zero(2, "two", "--resume", checkpoint, "--updates", "5")
        self.assertEqual(len(two["sharded"]), 10)
        self.assertLess(two["sharded"][0], four["sharded"][0] - 0.2, "not resumed")

    def test_zero1_with_lamb_matches_data_parallel(self):
        # LAMB's trust ratio sums each parameter's whole update: each worker
        # sums its block and an all-reduce adds them.
        self.zero(4, "lamb", "--lamb", "--updates", "5")

    def test_embedding_table_four_workers_match_one_worker(self):
        # A table with many rows per token: the compiled step updates it in
        # two halves, and with four workers averages its gradient over the
        # rows any worker picks, every worker's indices and output gradient
        # rows all-gathered through Gloo, not all-reduced in a bucket.
        one = self.train(1, 32, "one.json", "--tokens")
        four = self.train(4, 8, "four.json", "--tokens")
        self.assertTracks(one["losses"], four["losses"], 1e-5)

    def test_bf16_model_four_workers_track_one_worker(self):
        # A model kept in bf16 all-reduces bf16 gradients. Each worker's is
        # rounded to bf16 before the sum, which one worker's whole-batch
        # gradient is not, so the losses agree within bf16's rounding (2e-2
        # relative, as docs/pytorch.md says), not bit for bit.
        one = self.train(1, 32, "one.json", "--bf16")
        four = self.train(4, 8, "four.json", "--bf16")
        self.assertTracks(one["losses"], four["losses"], 2e-2)

    def test_bf16_master_weights_four_workers_track_one_worker(self):
        # kiln.optim.MasterWeights in a group: the bf16 gradients are
        # all-reduced, each worker adds the mean to its f32 copies, and the
        # replicas' bf16 parameters are the copies rounded alike.
        one = self.train(1, 32, "one.json", "--bf16", "--master-weights")
        four = self.train_every_rank("four", "--bf16", "--master-weights")
        self.assertEqual(len({r["digest"] for r in four}), 1, "the replicas differ")
        self.assertTracks(one["losses"], four[0]["losses"], 2e-2)

    def test_bf16_stochastic_rounding_keeps_replicas_identical(self):
        # Every worker's session draws its rounding bits from one seeded
        # generator, one draw a bf16 result in program order, so the
        # replicas, updated from one all-reduced gradient, round alike and
        # stay bit-identical; a rerun repeats bit for bit, and the bits are
        # not those of rounding to nearest.
        def run(name, stochastic):
            env = dict(self.env, KILN_STOCHASTIC_ROUNDING="1") if stochastic else self.env
            return self.train_every_rank(name, "--bf16", env=env)
        first, again = run("sr", True), run("sr-again", True)
        digests = {r["digest"] for r in first}
        self.assertEqual(len(digests), 1, "the replicas' parameters differ")
        self.assertEqual(again[0]["digest"], first[0]["digest"], "a rerun differs")
        self.assertEqual(again[0]["losses"], first[0]["losses"])
        self.assertNotEqual(run("nearest", False)[0]["digest"], first[0]["digest"],
                            "stochastic rounding changed nothing")
        self.assertLess(first[0]["losses"][-1], first[0]["losses"][0] - 0.3,
                        "the model did not learn")

    def test_precompiled_workers_compile_nothing(self):
        report = self.path("report.json")
        out = subprocess.run([KILN, "precompile", "--no-progress", "--report", report, "--",
                              *self.torchrun(4, "--batch", "8", "--steps", "3")],
                             env=self.env, cwd=HERE, capture_output=True, text=True,
                             timeout=300)
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
        graphs = load(report)["graphs"]
        self.assertEqual(len(graphs), 1, graphs)  # 4 workers, one graph
        four = self.train(4, 8, "four.json", "--steps", "5")
        self.assertEqual(four["stats"]["compiles"], 0)
        self.assertEqual(four["stats"]["hits"], 1)

    def test_resized_job_resumes_where_the_data_stopped_from_precompiled_graphs(self):
        # A job of 4 checkpoints at step 8 and stops; it restarts with 2
        # workers (a node left), which `kiln precompile --world-sizes 2,4`
        # compiled ahead: the resize is reported, no graph is compiled, and
        # the data order goes on at the sample the 4 workers had reached.
        out = subprocess.run([KILN, "precompile", "--no-progress", "--world-sizes", "2,4",
                              "--", *self.torchrun(4, "--batch", "8", "--steps", "3")],
                             env=self.env, cwd=HERE, capture_output=True, text=True,
                             timeout=300)
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
        self.assertIn("collecting graphs at world size 2", out.stderr)
        checkpoints = self.path("resize-checkpoints")
        self.train(4, 8, "four.json", "--steps", "8", "--checkpoints", checkpoints,
                   "--every", "4")
        two = self.run_ok(self.torchrun(2, "--batch", "8", "--steps", "12", "--out",
                                        self.path("two.json"), "--checkpoints",
                                        checkpoints, "--every", "4"))
        self.assertIn("kiln: resized from 4 to 2 data-parallel workers: resumed from the "
                      "step-8 checkpoint at sample 256 of the data order (epoch 0), "
                      "global batch 32 -> 16", two.stdout + two.stderr)
        self.assertIn("kiln: the step's graph for this size came from the cache",
                      two.stdout + two.stderr)
        self.assertEqual(load(self.path("two.json"))["stats"]["compiles"], 0)

    def test_killed_worker_resumes_from_the_last_checkpoint(self):
        reference = self.train(2, 8, "reference.json", "--steps", "24")
        pids, checkpoints = self.path("pids"), self.path("checkpoints")
        os.mkdir(pids)
        worker = subprocess.Popen(
            self.torchrun(2, "--batch", "8", "--steps", "24", "--out", self.path("run.json"),
                          "--checkpoints", checkpoints, "--every", "4", "--pid-dir", pids,
                          "--step-delay", "0.2", extra=("--max_restarts", "1")),
            env=self.env, cwd=HERE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True)
        try:
            deadline = time.time() + 120
            while not os.path.exists(os.path.join(checkpoints, "step-00000008.kckpt")):
                self.assertIsNone(worker.poll(), "the job ended before it could be killed")
                self.assertLess(time.time(), deadline, "no checkpoint appeared")
                time.sleep(0.05)
            with open(os.path.join(pids, "pid-1-0")) as f:
                os.kill(int(f.read()), signal.SIGKILL)
            output, _ = worker.communicate(timeout=300)
        finally:
            if worker.poll() is None:
                worker.kill()
        self.assertEqual(worker.returncode, 0, output[-4000:])
        self.assertIn("resumed from the step-", output)
        self.assertTrue(os.path.exists(os.path.join(pids, "pid-1-1")), "no restart happened")
        resumed = load(self.path("run.json"))
        self.assertEqual(resumed["losses"], reference["losses"])
        self.assertEqual(resumed["checksum"], reference["checksum"])

    def test_corrupt_checkpoint_is_skipped_for_the_one_before(self):
        # One flipped byte in the newest checkpoint's payload (the middle of
        # the file is tensor data): the resumed run reports it, falls back
        # to the checkpoint before it and ends where an uninterrupted run
        # does. A single worker, no launcher: the checkpoint is the subject.
        def run(out, steps, *args):
            return self.run_ok([sys.executable, WORKER, "--batch", "16", "--steps", str(steps),
                                "--out", self.path(out), *args])
        run("reference.json", 16)
        checkpoints = self.path("checkpoints")
        run("first.json", 12, "--checkpoints", checkpoints, "--every", "4")
        newest = os.path.join(checkpoints, "step-00000012.kckpt")
        with open(newest, "r+b") as f:
            data = bytearray(f.read())
            data[len(data) // 2] ^= 0xFF
            f.seek(0)
            f.write(data)
        out = run("resumed.json", 16, "--checkpoints", checkpoints, "--every", "4")
        self.assertIn(f"kiln: skipping checkpoint {newest}: checksum mismatch", out.stderr)
        self.assertIn("kiln: resumed from the step-8 checkpoint", out.stdout)
        resumed, reference = load(self.path("resumed.json")), load(self.path("reference.json"))
        self.assertEqual(resumed["losses"], reference["losses"])
        self.assertEqual(resumed["checksum"], reference["checksum"])

    def test_metrics_are_tensorboard_events_and_traces_on_demand(self):
        logdir, trace = self.path("tb"), self.path("trace.json")
        result = self.train(2, 8, "m.json", "--steps", "6", "--logdir", logdir,
                            "--trace", trace)
        files = glob.glob(os.path.join(logdir, "events.out.tfevents.*"))
        self.assertEqual(len(files), 1)  # rank 0 only
        events = read_events(files[0])
        self.assertEqual([s for s, _ in events], list(range(1, 7)))
        for (_, figures), loss in zip(events, result["losses"]):
            self.assertAlmostEqual(figures["loss"], loss, places=5)
            self.assertGreater(figures["modelled_step_ms"], 0)
            self.assertGreater(figures["mfu"], 0)
        with open(trace) as f:
            events = json.load(f)["traceEvents"]
        self.assertTrue(any(e.get("name") == "collective" for e in events))

    def test_missing_rank_times_out_naming_it(self):
        env = dict(self.env, RANK="0", WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(free_port()), KILN_COMM_TIMEOUT="2")
        out = subprocess.run([sys.executable, WORKER, "--batch", "8", "--steps", "2"],
                             env=env, cwd=HERE, capture_output=True, text=True, timeout=120)
        self.assertNotEqual(out.returncode, 0)
        self.assertIn("rendezvous timed out after 2 s on rank 0 of 2", out.stderr)
        self.assertIn("rank 1 did not join", out.stderr)

    def launch(self, size, port, *args, env=None):
        """`size` workers started without a launcher (RANK and WORLD_SIZE
        set by hand) on MASTER_PORT `port`."""
        env = dict(env or self.env, WORLD_SIZE=str(size), MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(port))
        return [subprocess.Popen([sys.executable, WORKER, "--batch", "8", *args],
                                 env=dict(env, RANK=str(r)), cwd=HERE, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)
                for r in range(size)]

    def wait_for(self, path, workers):
        """Polls for `path` while every worker runs (the test's own bound is
        the subprocess timeouts that follow)."""
        while not os.path.exists(path):
            for w in workers:
                if w.poll() is not None:
                    self.fail(f"a worker ended early ({w.returncode}): {w.stderr.read()[-3000:]}")
            time.sleep(0.05)

    def stop_all(self, workers):
        for w in workers:
            if w.poll() is None:
                w.kill()
            w.communicate()

    def test_stopped_worker_is_named_by_the_collective_timeout(self):
        # Rank 1 of 3 is stopped (SIGSTOP) mid-training. Rank 0 receives
        # from rank 2 in the ring and rank 2 from rank 1; both time out, and
        # both name rank 1, the rank they waited for.
        env = dict(self.env, KILN_COMM_TIMEOUT="3")
        pids, checkpoints = self.path("pids"), self.path("checkpoints")
        os.mkdir(pids)
        workers = self.launch(3, free_port(), "--steps", "400", "--step-delay", "0.05",
                              "--pid-dir", pids, "--checkpoints", checkpoints, "--every", "2",
                              env=env)
        try:
            self.wait_for(os.path.join(checkpoints, "step-00000004.kckpt"), workers)
            with open(os.path.join(pids, "pid-1-0")) as f:
                stopped = int(f.read())
            os.kill(stopped, signal.SIGSTOP)
            errors = {r: workers[r].communicate(timeout=300)[1] for r in (0, 2)}
        finally:
            self.stop_all(workers)
        for r, error in errors.items():
            self.assertNotEqual(workers[r].returncode, 0)
            self.assertIn(f"timed out after 3 s on rank {r} of 3 waiting for rank 1 "
                          f"(pid {stopped} on ", error)

    def test_second_group_on_a_busy_port_fails_naming_it(self):
        # Group A trains on MASTER_PORT; group B, started there too, fails on
        # every rank within its timeout: rank 0 cannot serve the store, and
        # rank 1 reaches A's store and finds its place taken.
        port = free_port()
        checkpoints = self.path("checkpoints")
        first = self.launch(2, port, "--steps", "2000", "--step-delay", "0.05",
                            "--checkpoints", checkpoints, "--every", "2")
        try:
            self.wait_for(os.path.join(checkpoints, "step-00000002.kckpt"), first)
            second = self.launch(2, port, "--steps", "4",
                                 env=dict(self.env, KILN_COMM_TIMEOUT="5"))
            try:
                errors = [w.communicate(timeout=300)[1] for w in second]
            finally:
                self.stop_all(second)
            first_failed = [w.poll() not in (None, 0) for w in first]
        finally:
            self.stop_all(first)
        self.assertEqual([w.returncode != 0 for w in second], [True, True], errors)
        address = f"127.0.0.1:{port}"
        self.assertIn(f"rank 0 of 2: cannot serve the rendezvous store at {address}: "
                      "Address already in use", errors[0])
        self.assertIn(f"rendezvous failed on rank 1 of 2: the rendezvous store at {address} "
                      "already has a rank 1 (pid ", errors[1])
        self.assertEqual(first_failed, [False, False], "group A failed")

    def test_file_store_rendezvous_without_a_launcher(self):
        env = dict(self.env, WORLD_SIZE="2", KILN_RENDEZVOUS="file:" + self.path("rdzv"))
        workers = [subprocess.Popen([sys.executable, WORKER, "--batch", "16", "--steps", "6",
                                     "--out", self.path(f"f{r}.json")],
                                    env=dict(env, RANK=str(r)), cwd=HERE,
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                   for r in range(2)]
        for w in workers:
            output, _ = w.communicate(timeout=300)
            self.assertEqual(w.returncode, 0, output[-3000:])
        tcp = self.train(2, 16, "tcp.json", "--steps", "6")
        self.assertEqual(load(self.path("f0.json"))["losses"], tcp["losses"])

    def all_reduce_workers(self, envs):
        """One process per environment, each joining the group and summing
        its rank + 1 across it; returns their outputs."""
        code = ("import kiln, torch; w = kiln.distributed.world(); "
                "print(float(kiln.distributed.all_reduce(torch.tensor([w.rank + 1.0]), "
                "mean=False)[0]))")
        workers = [subprocess.Popen([sys.executable, "-c", code], env=env, cwd=HERE,
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    text=True) for env in envs]
        outputs = []
        for w in workers:
            output, _ = w.communicate(timeout=120)
            self.assertEqual(w.returncode, 0, output[-3000:])
            outputs.append(output.strip().splitlines()[-1])
        return outputs

    @unittest.skipUnless(shutil.which("mpirun"), "mpirun is not installed (openmpi-bin)")
    def test_mpirun_workers_match_torchrun_workers(self):
        # Open MPI's own variables describe the group; the rendezvous address
        # travels with -x. On this 2-core machine the workers oversubscribe.
        env = dict(self.env, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()),
                   OMPI_MCA_rmaps_base_oversubscribe="1")
        self.run_ok(["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "2",
                     "-x", "MASTER_ADDR", "-x", "MASTER_PORT", "-x", "PYTHONPATH",
                     "-x", "KILN_CACHE_URL", "-x", "OMP_NUM_THREADS",
                     sys.executable, WORKER, "--batch", "8", "--steps", "6",
                     "--out", self.path("mpi.json")], env=env)
        mpi = load(self.path("mpi.json"))
        self.assertEqual(mpi["world"], 2)
        tcp = self.train(2, 8, "torchrun.json", "--steps", "6")
        self.assertEqual(mpi["losses"], tcp["losses"])

    def test_workers_of_different_restart_counts_rendezvous(self):
        # After a node is replaced, torchrun's survivors are on restart 1 and
        # the newcomer on restart 0: one rendezvous round all the same.
        port = str(free_port())
        envs = [dict(self.env, RANK=str(r), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
                     MASTER_PORT=port, TORCHELASTIC_RUN_ID="elastic",
                     TORCHELASTIC_RESTART_COUNT=str(1 - r), KILN_COMM_TIMEOUT="20")
                for r in range(2)]
        self.assertEqual(self.all_reduce_workers(envs), ["3.0", "3.0"])

    def test_file_store_rendezvous_reruns_with_the_same_run_id(self):
        # Two mpirun launches resuming one run (KILN_RUN_ID) share the file
        # store's directory; each launch is its own attempt.
        store = "file:" + self.path("rdzv-rerun")
        for job in ("1234", "1235"):
            envs = [dict(self.env, OMPI_COMM_WORLD_RANK=str(r), OMPI_COMM_WORLD_SIZE="2",
                         OMPI_COMM_WORLD_LOCAL_RANK=str(r), OMPI_MCA_ess_base_jobid=job,
                         KILN_RUN_ID="resumed", KILN_RENDEZVOUS=store,
                         KILN_COMM_TIMEOUT="20")
                    for r in range(2)]
            self.assertEqual(self.all_reduce_workers(envs), ["3.0", "3.0"])

    def test_two_hosts_share_one_cache(self):
        # Two process trees with different host identities: torchrun
        # multi-node (2 nodes x 2 workers) with the cache on "shared storage".
        port = free_port()
        hosts = []
        for node in range(2):
            command = [sys.executable, "-m", "kiln.torchrun", "--nnodes", "2",
                       "--node_rank", str(node), "--nproc_per_node", "2",
                       "--master_addr", "127.0.0.1", "--master_port", str(port),
                       WORKER, "--batch", "8", "--steps", "10",
                       "--out", self.path(f"host{node}.json")]
            hosts.append(subprocess.Popen(
                command, env=dict(self.env, KILN_HOST_ID=f"host-{node}"), cwd=HERE,
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
        for h in hosts:
            output, _ = h.communicate(timeout=300)
            self.assertEqual(h.returncode, 0, output[-3000:])
        multi = load(self.path("host0.json"))  # global rank 0 is on node 0
        single = self.train(4, 8, "single.json", "--steps", "10")
        self.assertEqual(multi["losses"], single["losses"])
        # One artifact in the shared cache, compiled once for both hosts.
        self.assertEqual(single["stats"]["compiles"], 0)
        artifacts = glob.glob(os.path.join(self.cache, "**", "*.kneff"), recursive=True)
        self.assertEqual(len(artifacts), 1, artifacts)


class NetworkNamespaceTest(unittest.TestCase):
    """Two hosts as two network namespaces joined by a veth pair, each with
    its own host name: the ranks reach each other over a network, not over
    loopback."""

    setUp, tearDown = DistributedTest.setUp, DistributedTest.tearDown
    path, run_ok = DistributedTest.path, DistributedTest.run_ok
    torchrun, train = DistributedTest.torchrun, DistributedTest.train

    @classmethod
    def setUpClass(cls):
        if os.geteuid() != 0 or not shutil.which("ip"):
            raise unittest.SkipTest("network namespaces need root and iproute2")
        tag = f"{os.getpid() % 100000}"
        cls.hosts = [f"kiln{tag}h{i}" for i in range(2)]
        subnet = 64 + os.getpid() % 128
        cls.addresses = [f"10.{subnet}.0.{i + 1}" for i in range(2)]
        commands = [["ip", "netns", "add", h] for h in cls.hosts] + [
            ["ip", "link", "add", f"k{tag}a", "netns", cls.hosts[0], "type", "veth",
             "peer", "name", f"k{tag}b", "netns", cls.hosts[1]]]
        for host, link, address in zip(cls.hosts, (f"k{tag}a", f"k{tag}b"), cls.addresses):
            commands += [["ip", "-n", host, "addr", "add", address + "/24", "dev", link],
                         ["ip", "-n", host, "link", "set", link, "up"],
                         ["ip", "-n", host, "link", "set", "lo", "up"]]
        for command in commands:
            result = subprocess.run(command, capture_output=True, text=True)
            if result.returncode != 0:
                cls.tearDownClass()
                raise unittest.SkipTest(f"this machine does not allow network namespaces "
                                        f"({' '.join(command)}: {result.stderr.strip()})")

    @classmethod
    def tearDownClass(cls):
        for host in getattr(cls, "hosts", []):
            subprocess.run(["ip", "netns", "del", host], capture_output=True)

    def in_host(self, node, command):
        """`command` run on host `node`: in its network namespace, under its
        own host name, with an /etc/hosts (bind-mounted in a mount namespace
        of its own) that resolves both hosts' names, as a cluster's DNS would."""
        hosts = self.path("hosts")
        with open(hosts, "w") as f:
            f.write("127.0.0.1 localhost\n" + "".join(
                f"{address} {name}\n" for name, address in zip(self.hosts, self.addresses)))
        host = self.hosts[node]
        return ["ip", "netns", "exec", host, "unshare", "--uts", "--mount", "sh", "-c",
                f'mount --bind {hosts} /etc/hosts && hostname {host} && exec "$@"', "sh",
                *command]

    def on_hosts(self, *args, env=None, timeout=300):
        """Node i of a 2-node torchrun job runs in namespace i; returns the
        nodes' (returncode, output)."""
        port = free_port()
        nodes = []
        for node, host in enumerate(self.hosts):
            command = self.in_host(node, [
                sys.executable, "-m", "kiln.torchrun",
                "--nnodes", "2", "--node_rank", str(node), "--nproc_per_node", "2",
                "--master_addr", self.addresses[0], "--master_port", str(port),
                WORKER, *args, "--out", self.path(f"node{node}.json")])
            nodes.append(subprocess.Popen(
                command, env=dict(env or self.env, KILN_HOST_ID=f"host-{node}"), cwd=HERE,
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
        return [(n.wait(timeout=timeout), n.communicate()[0]) for n in nodes]

    def test_two_hosts_over_a_network_match_one_host(self):
        for code, output in self.on_hosts("--batch", "8", "--steps", "10"):
            self.assertEqual(code, 0, output[-3000:])
        two_hosts = load(self.path("node0.json"))
        one_host = self.train(4, 8, "one-host.json", "--steps", "10")
        self.assertEqual(two_hosts["losses"], one_host["losses"])
        artifacts = glob.glob(os.path.join(self.cache, "**", "*.kneff"), recursive=True)
        self.assertEqual(len(artifacts), 1, artifacts)

    def elastic_node(self, node, rendezvous, out, *args):
        """One node of an elastic torchrun job (1 to 2 nodes of 2 workers,
        `rendezvous` the --rdzv_* options) in its namespace, in a session of
        its own so that the test can kill the whole node."""
        command = self.in_host(node, [
            sys.executable, "-m", "kiln.torchrun", "--nnodes", "1:2",
            "--nproc_per_node", "2", *rendezvous, "--rdzv_id", "elastic",
            "--rdzv_conf", "last_call_timeout=3", "--max_restarts", "3",
            "--monitor_interval", "1",
            WORKER, "--batch", "8", "--out", self.path(out), *args])
        return subprocess.Popen(command, env=dict(self.env, KILN_COMM_TIMEOUT="15"),
                                cwd=HERE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, start_new_session=True)

    def lose_a_host_and_take_a_replacement(self, rendezvous):
        """Both sizes precompiled; then 2 hosts train, host 1 is killed (its
        agent and workers, -9), host 0 goes on alone from the last
        checkpoint, and a replacement host 1 joins: the job returns to 4
        workers, whose survivors are on restart 2 and the newcomer on 0."""
        out = subprocess.run([KILN, "precompile", "--no-progress", "--world-sizes", "2,4",
                              "--", *self.torchrun(2, "--batch", "8", "--steps", "2")],
                             env=self.env, cwd=HERE, capture_output=True, text=True,
                             timeout=300)
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
        checkpoints = self.path("elastic-checkpoints")
        args = ("--steps", "40", "--checkpoints", checkpoints, "--every", "4",
                "--step-delay", "0.25")
        # Global rank 0 writes the results and reports resizes; after a
        # rendezvous it may be on either host.
        first = self.elastic_node(0, rendezvous, "elastic.json", *args)
        doomed = self.elastic_node(1, rendezvous, "elastic.json", *args)
        replacement = None
        try:
            deadline = time.time() + 180
            while not os.path.exists(os.path.join(checkpoints, "step-00000008.kckpt")):
                if first.poll() is not None:
                    self.fail("host 0 ended before host 1 was killed:\n" +
                              first.communicate()[0][-4000:])
                self.assertLess(time.time(), deadline, "no checkpoint appeared")
                time.sleep(0.1)
            os.killpg(doomed.pid, signal.SIGKILL)
            doomed.communicate()
            deadline = time.time() + 180
            while not glob.glob(os.path.join(checkpoints, "step-000000[12]*.kckpt")):
                self.assertIsNone(first.poll(), "host 0 did not go on alone")
                self.assertLess(time.time(), deadline, "host 0 made no checkpoint alone")
                time.sleep(0.1)
            replacement = self.elastic_node(1, rendezvous, "elastic.json", *args)
            output, _ = first.communicate(timeout=300)
            joined, _ = replacement.communicate(timeout=120)
        finally:
            for node in (first, doomed, replacement):
                if node is not None and node.poll() is None:
                    os.killpg(node.pid, signal.SIGKILL)
                    node.communicate()
        self.assertEqual(first.returncode, 0, output[-4000:])
        self.assertEqual(replacement.returncode, 0, joined[-4000:])
        self.assertIn("kiln: resized from 4 to 2 data-parallel workers", output)
        self.assertIn("kiln: resized from 2 to 4 data-parallel workers", output + joined)
        self.assertNotIn("was compiled at train time", output + joined)
        run = load(self.path("elastic.json"))
        self.assertEqual(run["world"], 4)
        self.assertEqual(len(run["losses"]), 40)
        # Close to an uninterrupted run, not equal: the steps between the
        # last checkpoint and the failure ran twice, and between the
        # resizes each step's batch was half the global one.
        steady = self.train(4, 8, "steady.json", "--steps", "40")
        final, expected = run["losses"][-1], steady["losses"][-1]
        print(f"elastic run's final loss {final:.4f}, uninterrupted {expected:.4f}",
              file=sys.stderr)
        self.assertLess(abs(final - expected), 0.25 * expected)

    def test_elastic_job_loses_a_host_and_takes_a_replacement(self):
        # torchrun's c10d rendezvous, its store on host 0.
        self.lose_a_host_and_take_a_replacement(
            ["--rdzv_backend", "c10d", "--rdzv_endpoint", f"{self.hosts[0]}:{free_port()}"])

    @unittest.skipUnless(shutil.which("etcd"), "etcd is not installed (etcd-server)")
    def test_elastic_job_over_etcd(self):
        # The same with an etcd rendezvous (Debian's etcd 3.4 serves the v2
        # API torch's backend speaks with --enable-v2), etcd on host 0.
        try:
            import etcd  # noqa: F401  (python3-etcd, torch's etcd client)
        except ImportError:
            self.skipTest("python3-etcd is not installed")
        port = free_port()
        url = f"http://{self.addresses[0]}:{port}"
        server = subprocess.Popen(self.in_host(0, [
            "etcd", "--enable-v2", "--data-dir", self.path("etcd"),
            "--listen-client-urls", url, "--advertise-client-urls", url,
            "--listen-peer-urls", f"http://127.0.0.1:{free_port()}"]),
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        try:
            self.lose_a_host_and_take_a_replacement(
                ["--rdzv_backend", "etcd", "--rdzv_endpoint", f"{self.addresses[0]}:{port}"])
        finally:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()

    def test_a_wrong_interface_is_named(self):
        env = dict(self.env, GLOO_SOCKET_IFNAME="lo", KILN_COMM_TIMEOUT="10")
        outputs = "\n".join(output for _, output in
                            self.on_hosts("--batch", "8", "--steps", "2", env=env))
        self.assertIn("(chosen by GLOO_SOCKET_IFNAME=lo)", outputs)
        self.assertIn("advertises the loopback address", outputs)


class CheckpointFileTest(unittest.TestCase):
    """The checkpoint directory's files, without training."""

    def setUp(self):
        self.dir = tempfile.mkdtemp()

    def tearDown(self):
        shutil.rmtree(self.dir)

    def test_first_format_without_a_digest_still_loads(self):
        torch.save({"format": "kiln-checkpoint-1", "extra": {"step": 4}},
                   os.path.join(self.dir, "step-00000004.kckpt"))
        saved = kiln.checkpoint.Checkpointer(self.dir, 4).latest()
        self.assertEqual(saved["extra"], {"step": 4})

    def test_abandoned_temporary_files_are_removed_by_restore_and_save(self):
        # A writer killed mid-save leaves "<checkpoint>.tmp-<host>-<pid>".
        # This host's dead writers' files go; so does any file nobody has
        # written to for an hour; a live writer's file and a recent one of
        # another host stay.
        os.environ["KILN_HOST_ID"] = "this-host"
        self.addCleanup(os.environ.pop, "KILN_HOST_ID")
        exited = subprocess.Popen([sys.executable, "-c", "pass"])
        exited.wait()
        long_ago = time.time() - 2 * 3600
        files = {  # name: (stale, last written two hours ago)
            f"step-00000004.kckpt.tmp-this-host-{exited.pid}": (True, False),
            f"step-00000004.kckpt.tmp-this-host-{os.getpid()}": (False, False),
            f"step-00000008.kckpt.tmp-other-host-{exited.pid}": (False, False),
            f"step-00000008.kckpt.tmp-other-host-{os.getpid()}": (True, True),
            f"step-00000012.kckpt.tmp-{os.getpid()}": (True, True),
        }

        def make():
            for name, (_, old) in files.items():
                path = os.path.join(self.dir, name)
                with open(path, "wb") as f:
                    f.write(b"torn")
                if old:
                    os.utime(path, (long_ago, long_ago))

        def left():
            return sorted(n for n in os.listdir(self.dir) if ".tmp-" in n)

        kept = sorted(n for n, (stale, _) in files.items() if not stale)
        checkpoints = kiln.checkpoint.Checkpointer(self.dir, 4)
        make()
        self.assertIsNone(checkpoints.restore(None))
        self.assertEqual(left(), kept)

        class Step:  # what save() asks of a CompiledStep
            def checkpoint_state(self):
                return {"steps": 16}
        make()
        checkpoints.save(Step())
        self.assertEqual(left(), kept)
        self.assertEqual(checkpoints.latest()["step"], {"steps": 16})


if __name__ == "__main__":
    unittest.main()
