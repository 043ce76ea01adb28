"""An installed Kiln works with no build tree on any path: `cmake --install`
into a fresh prefix, then `kiln precompile` of a training script and the
training itself, run from that prefix alone, against eager PyTorch; a C++
trainer (examples/cpp/installed) built with find_package(Kiln) against the
prefix, checked step by step against the reference interpreter and served
from the cache on its second run; and CPack's two packages.

    installed_kiln.py --build <build dir>
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

SCRIPT = r'''
import json, sys
import torch
import torch.nn.functional as F
import kiln

# Nothing of the build or source tree may be what runs.
assert kiln.__file__.startswith(sys.argv[1]), kiln.__file__
for entry in sys.path:
    assert "build" not in entry.split("/"), entry

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(),
                            torch.nn.Linear(32, 4))
eager = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(),
                            torch.nn.Linear(32, 4))
eager.load_state_dict(model.state_dict())
step = kiln.compile_step(model, F.cross_entropy, kiln.optim.SGD(lr=0.1))
optimizer = torch.optim.SGD(eager.parameters(), lr=0.1)
x = torch.randn(8, 16, generator=torch.Generator().manual_seed(1))
y = torch.randint(0, 4, (8,), generator=torch.Generator().manual_seed(2))
losses, reference = [], []
for _ in range(3):
    losses.append(float(step(x, y)))
    if kiln.collecting():
        sys.exit(0)
    loss = F.cross_entropy(eager(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    reference.append(float(loss))
print(json.dumps({"losses": losses, "reference": reference,
                  "compiles": step.cache_stats()["compiles"]}))
'''


def run(command, env, cwd):
    result = subprocess.run(command, env=env, cwd=cwd, capture_output=True, text=True,
                            timeout=600)
    if result.returncode != 0:
        sys.exit(f"installed_kiln: {' '.join(command)} failed ({result.returncode}):\n"
                 f"{result.stdout[-3000:]}{result.stderr[-3000:]}")
    return result.stdout


def check_cpp_trainer(prefix, root):
    """Builds examples/cpp/installed against `prefix` and trains with it."""
    source = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                          "examples", "cpp", "installed")
    build = os.path.join(root, "trainer")
    env = {"PATH": "/usr/bin:/bin", "HOME": root}
    run(["cmake", "-S", source, "-B", build, "-DCMAKE_BUILD_TYPE=Release",
         f"-DCMAKE_PREFIX_PATH={prefix}"], env, root)
    run(["cmake", "--build", build, "-j", "2"], env, root)
    trainer = os.path.join(build, "train_mlp")
    env = {"PATH": "/usr/bin:/bin", "HOME": root, "OMP_NUM_THREADS": "1",
           "KILN_CACHE_URL": os.path.join(root, "cpp-cache")}
    first = run([trainer, "--synthetic", "--steps", "40", "--check"], env, root)
    second = run([trainer, "--synthetic", "--steps", "5"], env, root)
    if "compiles 1, cache hits 0" not in first or "compiles 0, cache hits 1" not in second:
        sys.exit(f"installed_kiln: the C++ trainer's cache use is wrong:\n{first}\n{second}")
    print("installed_kiln: the C++ trainer: " +
          first.strip().splitlines()[-2].strip())


def check_packages(build, root):
    """CPack builds kiln and kiln-dev, each declaring its Debian dependencies."""
    out = os.path.join(root, "packages")
    run(["cpack", "-G", "DEB", "-B", out, "--config",
         os.path.join(build, "CPackConfig.cmake")], dict(os.environ), root)
    for name, needs in (("kiln", "python3-torch"), ("kiln-dev", "libmlir-22-dev")):
        debs = [f for f in os.listdir(out) if f.startswith(name + "_") and f.endswith(".deb")]
        if len(debs) != 1:
            sys.exit(f"installed_kiln: cpack made {os.listdir(out)}, not one {name} package")
        depends = run(["dpkg-deb", "-f", os.path.join(out, debs[0]), "Depends"],
                      dict(os.environ), root)
        if needs not in depends:
            sys.exit(f"installed_kiln: {debs[0]} does not depend on {needs}: {depends}")
    debs = sorted(f for f in os.listdir(out) if f.endswith('.deb'))
    print(f"installed_kiln: cpack built {', '.join(debs)}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", required=True)
    args = parser.parse_args()
    args.build = os.path.abspath(args.build)
    root = tempfile.mkdtemp(prefix="kiln-install-")
    try:
        prefix = os.path.join(root, "prefix")
        run(["cmake", "--install", args.build, "--prefix", prefix], dict(os.environ), root)
        work = os.path.join(root, "work")
        os.mkdir(work)
        with open(os.path.join(work, "train.py"), "w") as f:
            f.write(SCRIPT)
        package = os.path.join(prefix, "lib", "python3", "dist-packages")
        env = {"PATH": os.path.join(prefix, "bin") + ":/usr/bin:/bin",
               "PYTHONPATH": package, "HOME": root, "OMP_NUM_THREADS": "1",
               "KILN_CACHE_URL": os.path.join(root, "cache")}
        version = run(["kiln", "--version"], env, work)
        assert version.startswith("kiln "), version
        run(["kiln", "precompile", "--no-progress", "--", "/usr/bin/python3", "train.py",
             package], env, work)
        out = json.loads(run(["/usr/bin/python3", "train.py", package], env,
                             work).strip().splitlines()[-1])
        if out["compiles"] != 0:
            sys.exit(f"installed_kiln: the precompiled run compiled {out['compiles']} graphs")
        for got, want in zip(out["losses"], out["reference"]):
            if abs(got - want) > 1e-5 * abs(want):
                sys.exit(f"installed_kiln: loss {got} against eager {want}")
        print(f"installed_kiln: {prefix} trains with no build tree: losses "
              f"{out['losses']} (eager {out['reference']}), 0 compiles")
        check_cpp_trainer(prefix, root)
        check_packages(args.build, root)
    finally:
        shutil.rmtree(root)


if __name__ == "__main__":
    main()
