//===- InterpreterFixture.h - kgraph text on the interpreter ----*- C++ -*-===//
//
// The fixture of the reference interpreter's tests: parse a function, run
// it on host tensors, compare with expected values.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TEST_COMPILER_REFERENCE_INTERPRETERFIXTURE_H
#define KILN_TEST_COMPILER_REFERENCE_INTERPRETERFIXTURE_H

#include "compiler/graph/GraphConversion.h"
#include "compiler/reference/Interpreter.h"
#include "test/support/TestSupport.h"

namespace kiln::test {

using reference::HostTensor;

class InterpreterFixture : public ::testing::Test {
protected:
  /// Runs the single function of `ir` on `inputs`.
  std::vector<HostTensor> run(llvm::StringRef ir,
                              std::vector<HostTensor> inputs = {}) {
    module = test::parse(*context, ir);
    if (!module) {
      return {};
    }
    auto outputs =
        reference::interpret(*graph::getStepFunction(*module), inputs);
    EXPECT_TRUE(static_cast<bool>(outputs))
        << llvm::toString(outputs.takeError());
    return outputs ? *outputs : std::vector<HostTensor>();
  }
  std::string runError(llvm::StringRef ir,
                       std::vector<HostTensor> inputs = {}) {
    module = test::parse(*context, ir);
    return test::errorOf(
        reference::interpret(*graph::getStepFunction(*module), inputs));
  }
  static HostTensor f32(reference::Shape shape, std::vector<double> values) {
    HostTensor t(proto::F32, std::move(shape));
    t.data = std::move(values);
    return t;
  }
  static HostTensor i64(reference::Shape shape, std::vector<double> values) {
    HostTensor t(proto::I64, std::move(shape));
    t.data = std::move(values);
    return t;
  }
  static void expectNear(const HostTensor &t, std::vector<double> expected,
                         double tolerance = 1e-6) {
    ASSERT_EQ(t.data.size(), expected.size());
    for (size_t i = 0; i < expected.size(); ++i) {
      EXPECT_NEAR(t.data[i], expected[i], tolerance) << "element " << i;
    }
  }

  std::unique_ptr<mlir::MLIRContext> context = test::makeContext();
  mlir::OwningOpRef<mlir::ModuleOp> module;
};

} // namespace kiln::test

#endif // KILN_TEST_COMPILER_REFERENCE_INTERPRETERFIXTURE_H
