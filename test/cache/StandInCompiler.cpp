//===- StandInCompiler.cpp - a compile function for cache tests ----------===//

#include "test/cache/StandInCompiler.h"

#include "compiler/builder/GraphBuilder.h"
#include "compiler/graph/GraphFile.h"
#include "runtime/artifact/Artifact.h"

#include <chrono>
#include <cstdlib>
#include <fcntl.h>
#include <thread>
#include <unistd.h>

namespace kiln::test {

llvm::Expected<proto::Graph>
smallStepGraph(mlir::MLIRContext &context, llvm::StringRef name, double scale) {
  GraphBuilder b(context, name);
  auto x = b.input("x", proto::F32, {4, 8}, proto::BATCH_INPUT);
  auto w = b.input("w", proto::F32, {8, 2}, proto::PARAMETER);
  b.output("loss", b.reduceSum(b.matmul(x, w), {0, 1}), proto::LOSS);
  b.output("w", b.mul(w, b.scalar(scale)), proto::UPDATED_PARAMETER, w);
  return b.finishGraph();
}

llvm::Expected<std::string> standInCompile(const proto::Graph &graph,
                                           const CompileOptions &options) {
  if (const char *log = std::getenv("KILN_TEST_COMPILE_LOG")) {
    int fd = ::open(log, O_WRONLY | O_CREAT | O_APPEND, 0666);
    std::string line = std::to_string(::getpid()) + " " + graph.name() + "\n";
    if (fd >= 0) {
      ssize_t n = ::write(fd, line.data(), line.size());
      (void)n;
      ::close(fd);
    }
  }
  if (const char *seconds = std::getenv("KILN_TEST_COMPILE_SECONDS")) {
    std::this_thread::sleep_for(
        std::chrono::duration<double>(std::atof(seconds)));
  }
  if (const char *fail = std::getenv("KILN_TEST_COMPILE_FAIL");
      fail && *fail == '1') {
    return llvm::createStringError("stand-in compiler: op 'matmul' at "
                                   "model.py:12 has no lowering");
  }
  auto canonical = graph::canonicalBytes(graph);
  if (!canonical) {
    return canonical.takeError();
  }
  artifact::Artifact a;
  a.manifest.set_name(graph.name());
  a.manifest.set_target(options.target);
  a.constants = *canonical;
  if (const char *bytes = std::getenv("KILN_TEST_ARTIFACT_BYTES")) {
    size_t size = std::strtoull(bytes, nullptr, 10);
    while (a.constants.size() < size) {
      a.constants += static_cast<char>(a.constants.size() * 31 % 251);
    }
  }
  a.manifest.set_hbm_bytes(a.constants.size());
  a.compilerVersion = "stand-in";
  return artifact::writeArtifact(a);
}

} // namespace kiln::test
