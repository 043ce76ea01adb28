//===- TestSupport.h - helpers shared by Kiln's unit tests ------*- C++ -*-===//

#ifndef KILN_TEST_SUPPORT_TESTSUPPORT_H
#define KILN_TEST_SUPPORT_TESTSUPPORT_H

#include "compiler/target/Isa.h"
#include "dialects/KilnDialects.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

#include <string>

namespace kiln::test {

/// An MLIRContext with every Kiln dialect loaded.
inline std::unique_ptr<mlir::MLIRContext> makeContext() {
  mlir::DialectRegistry registry;
  registerKilnDialects(registry);
  auto context = std::make_unique<mlir::MLIRContext>(registry);
  context->loadAllAvailableDialects();
  return context;
}

/// Parses IR that a test writes inline; fails the test on a parse error.
inline mlir::OwningOpRef<mlir::ModuleOp> parse(mlir::MLIRContext &context,
                                               llvm::StringRef text) {
  auto module = mlir::parseSourceString<mlir::ModuleOp>(text, &context);
  EXPECT_TRUE(module) << "could not parse:\n" << text.str();
  return module;
}

/// `partitions` rows of `free` contiguous elements at byte `offset` of a
/// memory's partitions (in HBM, rows one after another).
inline isa::AccessPattern rowsOf(isa::Memory memory, int64_t partitions,
                                 int64_t free, int64_t offset = 0,
                                 isa::DType dtype = isa::DType::F32) {
  isa::AccessPattern ap;
  ap.memory = memory;
  ap.dtype = dtype;
  ap.partitions = static_cast<uint16_t>(partitions);
  ap.offset = offset;
  ap.rank = 1;
  ap.strides[0] = 1;
  ap.sizes[0] = free;
  ap.partitionStride = free;
  return ap;
}

/// The message of an Expected that must have failed.
template <typename T> std::string errorOf(llvm::Expected<T> value) {
  if (value) {
    ADD_FAILURE() << "expected an error, got a value";
    return "";
  }
  return llvm::toString(value.takeError());
}

/// A fixture with a fresh temporary directory, removed afterwards.
class TempDirTest : public ::testing::Test {
protected:
  void SetUp() override {
    ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("kiln-test", dir));
  }
  void TearDown() override { llvm::sys::fs::remove_directories(dir); }
  std::string path(llvm::StringRef name) const {
    llvm::SmallString<128> p(dir);
    llvm::sys::path::append(p, name);
    return p.str().str();
  }
  void writeBytes(llvm::StringRef name, llvm::StringRef bytes) const {
    std::error_code ec;
    llvm::raw_fd_ostream out(path(name), ec);
    ASSERT_FALSE(ec) << ec.message();
    out << bytes;
  }
  llvm::SmallString<128> dir;
};

} // namespace kiln::test

#endif // KILN_TEST_SUPPORT_TESTSUPPORT_H
