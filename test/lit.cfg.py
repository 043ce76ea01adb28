# Kiln's lit suite: FileCheck tests of the dialects, passes and tools.
import os

import lit.formats

config.name = "Kiln"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir", ".test"]
config.excludes = ["Inputs", "CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.kiln_obj_root, "test")

# Our tools first, then LLVM's FileCheck, not and count.
config.environment["PATH"] = os.pathsep.join(
    [config.kiln_tools_dir, config.llvm_tools_dir, config.environment.get("PATH", os.environ.get("PATH", ""))]
)
config.substitutions.append(("%python", config.python_executable))
# Checks that compare with the front end's host-side functions (kiln.rng).
config.environment["PYTHONPATH"] = os.path.join(config.kiln_obj_root, "python")
config.substitutions.append(("%kiln_src", config.kiln_src_root))
