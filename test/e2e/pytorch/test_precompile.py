"""kiln precompile end to end: a real training script collected, its graphs
compiled into a cache, then the same script trains with zero compiles."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
KILN = os.path.join(os.environ["KILN_BIN"], "kiln")
TRAIN = [sys.executable, os.path.join(HERE, "train_tiny.py")]


def load_json(path):
    with open(path) as f:
        return json.load(f)


class PrecompileTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()
        self.cache = os.path.join(self.dir, "cache")
        self.env = dict(os.environ, KILN_CACHE_URL=self.cache,
                        PYTHONPATH=os.pathsep.join(sys.path))
        self.env.pop("KILN_EXTRACT_GRAPHS_ONLY", None)

    def tearDown(self):
        shutil.rmtree(self.dir)

    def kiln(self, *args, check=True, cwd=HERE):
        out = subprocess.run([KILN, "precompile", "--no-progress", *args], env=self.env,
                             cwd=cwd, capture_output=True, text=True)
        if check and out.returncode != 0:
            self.fail(f"kiln precompile {args} failed ({out.returncode}):\n{out.stdout}{out.stderr}")
        return out

    def train(self, *args):
        out = subprocess.run(TRAIN + list(args), env=self.env, cwd=HERE,
                             capture_output=True, text=True, check=True)
        return json.loads(out.stdout.strip().splitlines()[-1])

    def test_precompile_then_train_with_zero_compiles(self):
        report = os.path.join(self.dir, "report.json")
        out = self.kiln("--report", report, "-j", "2", "--", *TRAIN, "--steps", "5")
        self.assertIn("2 graphs: 2 compiled", out.stdout)
        graphs = load_json(report)["graphs"]
        self.assertEqual([g["status"] for g in graphs], ["compiled", "compiled"])
        self.assertTrue(all(g["graph"] == "MLP" and g["artifact_bytes"] > 0 for g in graphs))

        run = self.train("--steps", "5")
        self.assertEqual(run["stats"]["compiles"], 0, run)
        self.assertEqual(run["stats"]["hits"], 2, run)
        self.assertEqual(sorted(run["keys"]), sorted(g["key"] for g in graphs))
        self.assertGreater(run["loss"], 0)

        again = self.kiln("--", *TRAIN, "--steps", "5")  # everything cached now
        self.assertIn("0 compiled, 2 already cached", again.stdout)

    def test_strict_mode_fails_at_a_short_last_batch_precompile_never_saw(self):
        self.kiln("--", *TRAIN, "--steps", "2", "--batches", "16")
        log = os.path.join(self.dir, "run.log")
        env = dict(self.env, KILN_CACHE_MODE="strict", KILN_CACHE_RUN_LOG=log)
        ok = subprocess.run(TRAIN + ["--steps", "2", "--batches", "16"], env=env, cwd=HERE,
                            capture_output=True, text=True)
        self.assertEqual(ok.returncode, 0, ok.stderr)
        # 40 samples in batches of 16: the last batch has 8.
        short = subprocess.run(TRAIN + ["--steps", "3", "--batches", "16,16,8"], env=env,
                               cwd=HERE, capture_output=True, text=True)
        self.assertNotEqual(short.returncode, 0)
        self.assertIn("strict cache mode (KILN_CACHE_MODE=strict): graph 'MLP'", short.stderr)
        self.assertIn("inputs: b.0 f32[8,16] here, f32[16,16] there", short.stderr)
        with open(log) as f:
            outcomes = [json.loads(line)["outcome"] for line in f]
        self.assertEqual(outcomes, ["hit", "hit", "missing"])
        report = subprocess.run([KILN, "cache", "coverage", "--run-log", log], env=self.env,
                                capture_output=True, text=True)
        self.assertEqual(report.returncode, 1, report.stdout + report.stderr)
        self.assertIn("the run used 2 graphs; 1 precompiled, 1 not", report.stdout)

    def test_readonly_mode_writes_nothing(self):
        self.kiln("--", *TRAIN, "--steps", "2", "--batches", "16")

        def files():
            return {os.path.join(d, f): os.stat(os.path.join(d, f)).st_mtime_ns
                    for d, _, names in os.walk(self.cache) for f in names}
        before = files()
        env = dict(self.env, KILN_CACHE_MODE="readonly")
        out = subprocess.run(TRAIN + ["--steps", "2", "--batches", "16,8"], env=env,
                             cwd=HERE, capture_output=True, text=True, check=True)
        stats = json.loads(out.stdout.strip().splitlines()[-1])["stats"]
        self.assertEqual((stats["hits"], stats["compiles"]), (1, 1), stats)
        self.assertEqual(files(), before)

    def test_accumulation_graphs_are_all_collected(self):
        # One batch size, 3 micro-batches per update: the accumulate and
        # the update graph, both collected by a run of 3 calls.
        out = self.kiln("--", *TRAIN, "--steps", "3", "--batches", "8",
                        "--accumulate", "3")
        self.assertIn("2 graphs: 2 compiled", out.stdout)
        run = self.train("--steps", "6", "--batches", "8", "--accumulate", "3")
        self.assertEqual(run["stats"]["compiles"], 0, run)
        self.assertEqual(run["stats"]["hits"], 2, run)

    def test_graphs_of_several_workers_are_deduplicated(self):
        # Four workers of one job (as a launcher starts them) record the same
        # two graphs; precompile compiles each once. Collection needs no
        # rendezvous, so a shell can launch them (test_distributed.py does it
        # with torchrun).
        workers = " & ".join(f"RANK={r} WORLD_SIZE=4 {' '.join(TRAIN)}"
                             for r in range(4)) + "; wait"
        out = self.kiln("--", "/bin/sh", "-c", workers)
        self.assertIn("2 graphs: 2 compiled", out.stdout)

    def test_crash_during_collection_still_compiles_what_was_recorded(self):
        out = self.kiln("--", *TRAIN, "--crash-after", "1", check=False)
        self.assertEqual(out.returncode, 1)
        self.assertIn("failed during collection (exit status 3)", out.stderr)
        self.assertIn("1 graphs: 1 compiled", out.stdout)
        run = self.train("--steps", "1")
        self.assertEqual(run["stats"]["compiles"], 0)

    def test_collect_then_compile_in_shards(self):
        graphs = os.path.join(self.dir, "graphs")
        self.kiln("--command", "collect", "--graphs", graphs, "--", *TRAIN,
                  "--batches", "4,8,12,16")
        keys = set()
        for shard in ("0/2", "1/2"):
            report = os.path.join(self.dir, f"shard{shard[0]}.json")
            self.kiln("--command", "compile", "--graphs", graphs, "--shard", shard,
                      "--report", report)
            keys |= {g["key"] for g in load_json(report)["graphs"]}
        self.assertEqual(len(keys), 4)
        run = self.train("--batches", "4,8,12,16")
        self.assertEqual(run["stats"]["compiles"], 0)
        self.kiln("--command", "clean", "--graphs", graphs)
        self.assertFalse(os.path.exists(graphs))

    def test_failed_graph_fails_the_run_and_keep_going_compiles_the_rest(self):
        graphs = os.path.join(self.dir, "graphs")
        self.kiln("--command", "collect", "--graphs", graphs, "--", *TRAIN)
        broken = sorted(f for f in os.listdir(graphs) if f.endswith(".kgraph.pb"))[0]
        with open(os.path.join(graphs, broken), "r+b") as f:
            f.write(b"\xff\xff\xff\xff")
        out = self.kiln("--command", "compile", "--graphs", graphs, "--keep-going",
                        "--max-retries", "0", check=False)
        self.assertEqual(out.returncode, 1)
        self.assertIn("1 compiled", out.stdout)
        self.assertIn("1 failed", out.stdout)
        self.assertIn(broken[:16], out.stdout)

    def test_clean_removes_only_collected_files(self):
        # --graphs naming a project directory by mistake: its own files stay.
        project = os.path.join(self.dir, "project")
        os.makedirs(os.path.join(project, "src"))
        for name in ("train.py", os.path.join("src", "model.py")):
            with open(os.path.join(project, name), "w") as f:
                f.write("print(1)\n")
        self.kiln("--command", "collect", "--graphs", project, "--", *TRAIN)
        collected = [f for f in os.listdir(project) if f.endswith((".kgraph.pb", ".flags"))]
        self.assertEqual(len(collected), 4, collected)
        out = self.kiln("--command", "clean", "--graphs", ".", check=False,
                        cwd=project)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn("removed 4 collected graph files", out.stdout)
        self.assertIn("kept", out.stderr)
        self.assertEqual(sorted(os.listdir(project)), ["src", "train.py"])
        self.assertTrue(os.path.exists(os.path.join(project, "src", "model.py")))

    def test_graph_compiled_but_not_cached_fails_the_run(self):
        # A full cache disk (injected): the graphs compile, but nobody would
        # find them, so precompile has not done its job.
        self.env["KILN_CACHE_FAULT"] = "enospc@write"
        report = os.path.join(self.dir, "report.json")
        out = self.kiln("--report", report, "--", *TRAIN, check=False)
        self.assertEqual(out.returncode, 1, out.stdout + out.stderr)
        self.assertIn("2 graphs: 0 compiled", out.stdout)
        self.assertIn("2 unpublished", out.stdout)
        graphs = load_json(report)["graphs"]
        self.assertEqual([g["status"] for g in graphs], ["unpublished"] * 2)
        self.assertTrue(all("No space left on device" in g["error"] for g in graphs), graphs)

    def test_nothing_collected_or_nothing_to_compile(self):
        out = self.kiln("--", "true", check=False)
        self.assertEqual(out.returncode, 0)
        self.assertIn("warning: precompile: the training command recorded no graph", out.stderr)
        missing = os.path.join(self.dir, "missing")
        out = self.kiln("--command", "compile", "--graphs", missing, check=False)
        self.assertEqual(out.returncode, 2)
        self.assertIn("no graphs were collected", out.stderr)
        out = self.kiln("--command", "compile", "--graphs", TRAIN[1], check=False)
        self.assertEqual(out.returncode, 2)
        self.assertIn("is not a directory", out.stderr)

    def test_bad_usage(self):
        out = self.kiln("--shard", "3/2", "--", "true", check=False)
        self.assertEqual(out.returncode, 2)
        self.assertIn("--shard", out.stderr)
        for timeout in ("nan", "inf", "-1", "0"):
            out = self.kiln("--timeout", timeout, "--", "true", check=False)
            self.assertEqual(out.returncode, 2, timeout)
            self.assertIn("--timeout", out.stderr)
        out = self.kiln(check=False)
        self.assertEqual(out.returncode, 2)
        self.assertIn("training command", out.stderr)


if __name__ == "__main__":
    unittest.main()
