"""The cache's remote tiers against real servers on 127.0.0.1: nginx with
WebDAV PUT (an http:// tier) and s3rver (an s3:// tier, npm; see
docs/cache.md for why that one). Each "host" is a C++ trainer process with
a local cache directory of its own in front of the one remote.

    remote_cache.py --bin <build>/bin --servers <build>/test-servers
"""

import argparse
import glob
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import unittest

ARGS = None


def read_bytes(path):
    with open(path, "rb") as f:
        return f.read()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port, process, what, seconds=20):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{what} exited with {process.returncode}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise RuntimeError(f"{what} did not listen on port {port} in {seconds} s")


class Nginx:
    """nginx serving <dir>/www, taking PUT and DELETE under /kiln/."""

    def __init__(self, work):
        self.dir = os.path.join(work, "nginx")
        self.root = os.path.join(self.dir, "www")
        os.makedirs(os.path.join(self.root, "kiln"))
        os.makedirs(os.path.join(self.dir, "body"))
        self.port = free_port()
        conf = os.path.join(self.dir, "nginx.conf")
        temp = os.path.join(self.dir, "body")
        with open(conf, "w") as f:
            f.write(f"""daemon off;
master_process off;
pid {self.dir}/nginx.pid;
error_log {self.dir}/error.log;
events {{ worker_connections 64; }}
http {{
  access_log off;
  client_body_temp_path {temp};
  proxy_temp_path {temp}; fastcgi_temp_path {temp};
  uwsgi_temp_path {temp}; scgi_temp_path {temp};
  client_max_body_size 0;
  server {{
    listen 127.0.0.1:{self.port};
    root {self.root};
    location /kiln/ {{
      dav_methods PUT DELETE;
      create_full_put_path on;
      autoindex on;
      autoindex_format json;
    }}
    # The same files, for readers only.
    location /kiln-readers/ {{
      alias {self.root}/kiln/;
      limit_except GET {{ deny all; }}
    }}
  }}
}}
""")
        self.process = subprocess.Popen(["nginx", "-p", self.dir, "-c", conf],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        wait_for_port(self.port, self.process, "nginx")
        self.url = f"http://127.0.0.1:{self.port}/kiln/team"

    def objects(self):
        return glob.glob(os.path.join(self.root, "kiln", "team", "**", "*.kneff"),
                         recursive=True)

    def stop(self):
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=20)


class S3rver:
    """s3rver with the bucket kiln-test; its credentials are S3RVER/S3RVER."""

    def __init__(self, work):
        self.dir = os.path.join(work, "s3rver")
        os.makedirs(self.dir)
        self.port = free_port()
        binary = os.path.join(ARGS.servers, "node_modules", ".bin", "s3rver")
        self.process = subprocess.Popen(
            [binary, "-d", self.dir, "-a", "127.0.0.1", "-p", str(self.port), "--silent",
             "--configure-bucket", "kiln-test"],
            stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        wait_for_port(self.port, self.process, "s3rver")
        self.url = "s3://kiln-test/team/a"
        self.env = {"AWS_ENDPOINT_URL": f"http://127.0.0.1:{self.port}",
                    "AWS_ACCESS_KEY_ID": "S3RVER", "AWS_SECRET_ACCESS_KEY": "S3RVER",
                    "AWS_REGION": "us-east-1"}

    def objects(self):
        return glob.glob(os.path.join(self.dir, "kiln-test", "team", "a", "**",
                                      "*.kneff._S3rver_object"), recursive=True)

    def stop(self):
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=20)


# A PyTorch training run whose remote tier stops between its two graphs:
# step 1 (batch 8) is served by the tier, then the script stops the server
# (its pid in STOP_PID) before step 2 (batch 16) asks it.
MID_RUN_SCRIPT = r'''
import json, os, signal, time
import torch
import torch.nn.functional as F
import kiln

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
step = kiln.compile_step(model, F.cross_entropy, kiln.optim.SGD(lr=0.1))
losses = [float(step(torch.randn(8, 16), torch.randint(0, 4, (8,))))]
if os.environ.get("STOP_PID"):
    os.kill(int(os.environ["STOP_PID"]), signal.SIGTERM)
    time.sleep(1)
losses.append(float(step(torch.randn(16, 16), torch.randint(0, 4, (16,)))))
if os.environ.get("LAST_BATCH"):  # a short last batch
    n = int(os.environ["LAST_BATCH"])
    losses.append(float(step(torch.randn(n, 16), torch.randint(0, 4, (n,)))))
print(json.dumps({"losses": losses, "keys": step.keys, "stats": step.cache_stats()}))
'''


class TierFixture:
    """A server of `server_class` per test, and hosts that train against it."""

    server_class = None

    def setUp(self):
        self.work = tempfile.mkdtemp(prefix="kiln-remote-")
        self.server = self.server_class(self.work)

    def tearDown(self):
        self.server.stop()
        shutil.rmtree(self.work)

    def train(self, host, env=None, steps=3):
        """Runs the C++ trainer as `host`; returns (compiles, hits, stderr)."""
        local = os.path.join(self.work, "host-" + host)
        full = {"PATH": "/usr/bin:/bin", "HOME": self.work, "OMP_NUM_THREADS": "1",
                "KILN_CACHE_LOCAL": local, "KILN_CACHE_REMOTE_TIMEOUT": "5",
                "KILN_HOST_ID": "host-" + host,
                **getattr(self.server, "env", {}), **(env or {})}
        result = subprocess.run(
            [os.path.join(ARGS.bin, "kiln-example-train-mlp"), "--synthetic", "--steps",
             str(steps), "--batch", "16", "--hidden", "32", "--cache", self.server.url],
            env=full, capture_output=True, text=True, timeout=300)
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        found = re.search(r"compiles (\d+), cache hits (\d+)", result.stdout)
        self.assertIsNotNone(found, result.stdout)
        return int(found.group(1)), int(found.group(2)), result.stderr

    def local_objects(self, host):
        return glob.glob(os.path.join(self.work, "host-" + host, "kiln-*", "objects", "*",
                                      "*.kneff"))



class RemoteTierTest(TierFixture):
    """The cases every remote tier passes; subclasses say which server."""

    def test_a_second_host_compiles_nothing_after_the_first(self):
        self.assertEqual(self.train("a")[:2], (1, 0))
        self.assertEqual(len(self.server.objects()), 1)
        compiles, hits, err = self.train("b")
        self.assertEqual((compiles, hits), (0, 1), err)
        self.assertEqual(err, "")
        # The second host keeps a copy: its next run is a local hit.
        self.assertEqual(len(self.local_objects("b")), 1)
        stats = subprocess.run(
            [os.path.join(ARGS.bin, "kiln"), "cache", "stats", "--json", "--cache",
             os.path.join(self.work, "host-b")], capture_output=True, text=True, check=True)
        counters = json.loads(stats.stdout)
        self.assertEqual((counters["hits"], counters["remote_hits"]), (1, 1), counters)
        self.assertEqual(counters["hosts"]["host-b"]["remote_hits"], 1, counters)
        # What the hit saved: the first host's compile, from the tier's record.
        self.assertGreater(counters["seconds_saved"], 0, counters)
        self.server.stop()
        self.assertEqual(self.train("b")[:2], (0, 1))

    def cache_command(self, *args, env=None, expect=0):
        full = {"PATH": "/usr/bin:/bin", "HOME": self.work,
                **getattr(self.server, "env", {}), **(env or {})}
        result = subprocess.run([os.path.join(ARGS.bin, "kiln"), "cache", *args,
                                 "--cache", self.server.url],
                                env=full, capture_output=True, text=True, timeout=120)
        self.assertEqual(result.returncode, expect, result.stdout + result.stderr)
        return result.stdout + result.stderr

    def test_maintenance_on_the_remote_tier(self):
        self.train("a")
        self.train("b", env={"KILN_CACHE_LOCAL": ""}, steps=1)  # same graph
        out = self.cache_command("ls")
        self.assertRegex(out, r"1 entries, [0-9.]+ KiB in " + re.escape(self.server.url))
        self.assertIn("1 entries", self.cache_command("stats"))
        self.assertIn("1 artifacts checked, 0 bad", self.cache_command("verify"))
        doctor = self.cache_command("doctor")
        self.assertEqual(doctor.count(" ok "), 4, doctor)
        [remote] = self.server.objects()
        with open(remote, "r+b") as f:
            f.seek(100)
            f.write(b"\xff" * 8)
        self.assertIn("1 bad", self.cache_command("verify", expect=1))
        self.assertIn("1 bad, 1 removed", self.cache_command("verify", "--repair", expect=1))
        self.assertEqual(self.server.objects(), [])
        self.train("c")
        self.assertIn("1 too young", self.cache_command("gc", "--max-size", "0"))
        self.assertIn("would remove 1 entries",
                      self.cache_command("gc", "--max-size", "0", "--grace", "0", "--dry-run"))
        self.assertEqual(len(self.server.objects()), 1)
        self.assertIn("removed 1 entries",
                      self.cache_command("prune", "--older-than", "0", "--grace", "0"))
        self.assertEqual(self.server.objects(), [])
        self.assertIn("works on a cache directory",
                      self.cache_command("index", "rebuild", expect=2))

    def test_bundles_move_between_tiers(self):
        self.train("a")
        bundle = os.path.join(self.work, "bundle.zip")
        self.assertIn("exported 1 artifacts", self.cache_command("export", bundle))
        self.assertIn("removed 1 entries",
                      self.cache_command("prune", "--older-than", "0", "--grace", "0"))
        self.assertIn("uploaded 1 artifacts", self.cache_command("import", bundle))
        self.assertEqual(self.train("b")[:2], (0, 1))
        # A directory imports what the remote tier exported, and exports
        # what the remote tier imports.
        kiln = os.path.join(ARGS.bin, "kiln")
        local = os.path.join(self.work, "directory")
        subprocess.run([kiln, "cache", "import", bundle, "--cache", local], check=True,
                       capture_output=True)
        again = os.path.join(self.work, "again.zip")
        subprocess.run([kiln, "cache", "export", again, "--cache", local], check=True,
                       capture_output=True)
        self.assertIn("uploaded 1 artifacts", self.cache_command("import", again))
        with open(os.path.join(self.work, "junk.zip"), "wb") as f:
            f.write(b"not a zip")
        self.assertIn("cannot open", self.cache_command(
            "import", os.path.join(self.work, "junk.zip"), expect=2))

    def test_two_hosts_missing_at_once_compile_at_most_once_each(self):
        # No lease spans hosts that share only the remote tier: both may
        # compile, and both upload the same bytes.
        import concurrent.futures
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            runs = list(pool.map(self.train, ["a", "b"]))
        compiles = sum(run[0] for run in runs)
        self.assertIn(compiles, (1, 2), runs)
        self.assertEqual(len(self.server.objects()), 1)
        self.assertEqual(read_bytes(self.local_objects("a")[0]),
                         read_bytes(self.local_objects("b")[0]))
        self.assertEqual(self.train("c")[:2], (0, 1))

    def test_a_corrupt_remote_object_is_reported_not_used_and_replaced(self):
        self.train("a")
        [remote] = self.server.objects()
        good = read_bytes(remote)
        with open(remote, "r+b") as f:
            f.seek(len(good) // 2)
            f.write(bytes(b ^ 0xFF for b in good[len(good) // 2:len(good) // 2 + 16]))
        compiles, hits, err = self.train("b")
        self.assertEqual((compiles, hits), (1, 0))
        self.assertIn("corrupt remote object", err)
        self.assertIn("not used, recompiling", err)
        self.assertEqual(read_bytes(remote), good)  # the upload replaced it
        self.assertEqual(self.train("c")[:2], (0, 1))

    def python_run(self, host, precompile=False, stop=None, env=None, check=True):
        """MID_RUN_SCRIPT as `host` (under `kiln precompile` if asked)."""
        script = os.path.join(self.work, "mid_run.py")
        with open(script, "w") as f:
            f.write(MID_RUN_SCRIPT)
        python = os.path.join(os.path.dirname(os.path.abspath(ARGS.bin)), "python")
        env = {"PATH": ARGS.bin + ":/usr/bin:/bin", "HOME": self.work,
               "OMP_NUM_THREADS": "1", "PYTHONPATH": python,
               "KILN_CACHE_URL": self.server.url,
               "KILN_CACHE_LOCAL": os.path.join(self.work, "py-" + host),
               **getattr(self.server, "env", {}),
               **({"STOP_PID": str(stop)} if stop else {}), **(env or {})}
        command = ["/usr/bin/python3", script]
        if precompile:
            command = ["kiln", "precompile", "--no-progress", "--"] + command
        result = subprocess.run(command, env=env, capture_output=True, text=True,
                                timeout=300)
        if not check:
            return result
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        if precompile:
            return result.stdout, result.stderr
        return json.loads(result.stdout.strip().splitlines()[-1]), result.stderr

    def test_a_second_host_trains_with_zero_compiles_after_the_first_precompiles(self):
        out, err = self.python_run("a", precompile=True)
        self.assertIn("2 graphs: 2 compiled", out)
        self.assertEqual(len(self.server.objects()), 2)
        run, err = self.python_run("b", env={"KILN_CACHE_MODE": "strict"})
        self.assertEqual((run["stats"]["compiles"], run["stats"]["remote_hits"]), (0, 2), run)
        self.assertEqual(err, "")
        # Strict mode on a host that did not precompile explains a miss with
        # the manifest precompile left on the tier.
        short = self.python_run("c", env={"KILN_CACHE_MODE": "strict", "LAST_BATCH": "4"},
                                check=False)
        self.assertNotEqual(short.returncode, 0)
        self.assertIn("inputs: b.0 f32[4,16] here, f32[", short.stderr)

    def test_a_server_stopped_mid_run_costs_one_warning_and_the_run_completes(self):
        run = self.python_run
        first, err = run("a")  # both graphs compiled and uploaded
        self.assertEqual(first["stats"]["compiles"], 2, first)
        self.assertEqual(err, "")
        # Host b's step 1 is served by the tier; its step 2 misses locally
        # and asks the tier after the server has gone.
        second, err = run("b", stop=self.server.process.pid)
        self.assertEqual(second["stats"]["remote_hits"], 1, second)
        self.assertEqual(second["stats"]["compiles"], 1, second)
        lines = [l for l in err.splitlines() if l.strip()]
        self.assertEqual(len(lines), 1, err)
        self.assertIn("going on with the local tier only", lines[0])
        self.assertEqual(second["losses"][0], first["losses"][0])

    def test_a_stopped_server_costs_one_warning_and_the_run_completes(self):
        self.server.stop()
        compiles, hits, err = self.train("a")
        self.assertEqual((compiles, hits), (1, 0))
        lines = [l for l in err.splitlines() if l.strip()]
        self.assertEqual(len(lines), 1, err)
        self.assertIn(self.server.url, lines[0])
        self.assertIn("going on with the local tier only", lines[0])
        self.assertEqual(self.train("a")[:2], (0, 1))  # the local tier kept it


class HttpTierTest(RemoteTierTest, unittest.TestCase):
    server_class = Nginx


class HttpReadersTest(TierFixture, unittest.TestCase):
    """A tier this host may read but not write: nginx refuses its PUTs."""
    server_class = Nginx

    def test_refused_uploads_warn_once_and_reads_go_on(self):
        self.train("a")
        writers = self.server.url
        self.server.url = writers.replace("/kiln/", "/kiln-readers/")
        compiles, hits, err = self.train("b")
        self.assertEqual((compiles, hits, err), (0, 1, ""))
        # Another graph (batch 8): compiled here, and its upload refused.
        run = subprocess.run(
            [os.path.join(ARGS.bin, "kiln-example-train-mlp"), "--synthetic", "--steps", "1",
             "--batch", "8", "--hidden", "32", "--cache", self.server.url],
            env={"PATH": "/usr/bin:/bin", "HOME": self.work, "OMP_NUM_THREADS": "1",
                 "KILN_CACHE_LOCAL": os.path.join(self.work, "host-b")},
            capture_output=True, text=True, timeout=300)
        self.assertEqual(run.returncode, 0, run.stderr)
        lines = [l for l in run.stderr.splitlines() if l.strip()]
        self.assertEqual(len(lines), 1, run.stderr)
        self.assertIn("HTTP 403", lines[0])
        self.assertIn("uploads nothing more (it still reads the remote tier)", lines[0])
        self.assertEqual(len(self.server.objects()), 1)


class S3TierTest(RemoteTierTest, unittest.TestCase):
    server_class = S3rver

    def test_wrong_credentials_are_one_line_naming_the_bucket_and_status(self):
        compiles, hits, err = self.train("a", env={"AWS_ACCESS_KEY_ID": "WRONG"})
        self.assertEqual((compiles, hits), (1, 0))
        lines = [l for l in err.splitlines() if l.strip()]
        self.assertEqual(len(lines), 1, err)
        self.assertIn("bucket 'kiln-test'", lines[0])
        self.assertIn("HTTP 403", lines[0])
        self.assertEqual(self.server.objects(), [])

    def test_missing_credentials_are_one_line(self):
        compiles, _, err = self.train("a", env={"AWS_ACCESS_KEY_ID": "",
                                                "AWS_SECRET_ACCESS_KEY": ""})
        self.assertEqual(compiles, 1)
        self.assertIn("no AWS credentials", err)

    def test_credentials_from_a_container_endpoint(self):
        # What the ECS agent (AWS Batch) or the EKS Pod Identity agent
        # serves: JSON credentials for a request with the task's token.
        import http.server
        import threading
        asked = []

        class Endpoint(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                asked.append(self.headers.get("Authorization"))
                good = self.headers.get("Authorization") == "task-token"
                body = json.dumps({"AccessKeyId": "S3RVER", "SecretAccessKey": "S3RVER",
                                   "Token": "session", "Expiration": "2099-01-01T00:00:00Z"}
                                  if good else {"message": "no"}).encode()
                self.send_response(200 if good else 401)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        server = http.server.HTTPServer(("127.0.0.1", 0), Endpoint)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        try:
            url = f"http://127.0.0.1:{server.server_port}/v2/credentials/task"
            env = {"AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": "",
                   "AWS_SHARED_CREDENTIALS_FILE": os.path.join(self.work, "none"),
                   "AWS_CONTAINER_CREDENTIALS_FULL_URI": url,
                   "AWS_CONTAINER_AUTHORIZATION_TOKEN": "task-token"}
            compiles, _, err = self.train("a", env=env)
            self.assertEqual((compiles, err), (1, ""))
            self.assertEqual(len(self.server.objects()), 1)
            self.assertEqual(asked[0], "task-token")
            compiles, _, err = self.train("b", env=dict(
                env, AWS_CONTAINER_AUTHORIZATION_TOKEN="wrong"))
            self.assertEqual(compiles, 1)
            self.assertIn("the container credentials endpoint " + url +
                          " answered HTTP 401 without credentials", err)
        finally:
            server.shutdown()
            server.server_close()

    def test_credentials_from_the_shared_file(self):
        with open(os.path.join(self.work, "credentials"), "w") as f:
            f.write("[default]\naws_access_key_id = WRONG\naws_secret_access_key = x\n"
                    "[kiln]\naws_access_key_id = S3RVER\naws_secret_access_key = S3RVER\n")
        env = {"AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": "", "AWS_PROFILE": "kiln",
               "AWS_SHARED_CREDENTIALS_FILE": os.path.join(self.work, "credentials")}
        compiles, _, err = self.train("a", env=env)
        self.assertEqual((compiles, err), (1, ""))
        self.assertEqual(len(self.server.objects()), 1)


def main():
    global ARGS
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", required=True)
    parser.add_argument("--servers", required=True)
    ARGS, rest = parser.parse_known_args()
    missing = [what for what, ok in (
        ("nginx (Debian's nginx-light)", shutil.which("nginx")),
        ("s3rver (tools/dev.sh test installs it into <build>/test-servers)",
         os.path.exists(os.path.join(ARGS.servers, "node_modules", ".bin", "s3rver"))))
        if not ok]
    if missing:
        print("remote_cache: skipped: no " + ", ".join(missing))
        sys.exit(77)
    unittest.main(argv=[sys.argv[0]] + rest)


if __name__ == "__main__":
    main()
