//===- ToolSupport.cpp - shared pieces of the kiln subcommands -----------===//

#include "tools/kiln/ToolSupport.h"

#include "compiler/graph/GraphConversion.h"
#include "compiler/graph/GraphFile.h"
#include "dialects/KilnDialects.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/raw_ostream.h"

#include <sys/mman.h>
#include <unistd.h>

namespace kiln::tool {

std::string captureStderr(llvm::function_ref<void()> body) {
  llvm::errs().flush();
  int saved = ::dup(2);
  int capture = ::memfd_create("kiln-stderr", MFD_CLOEXEC);
  if (saved < 0 || capture < 0 || ::dup2(capture, 2) < 0) {
    for (int fd : {saved, capture}) {
      if (fd >= 0) {
        ::close(fd);
      }
    }
    body();
    return "";
  }
  body();
  llvm::errs().flush();
  ::dup2(saved, 2);
  ::close(saved);
  std::string text;
  char buffer[4096];
  for (off_t offset = 0;;) {
    ssize_t n = ::pread(capture, buffer, sizeof buffer, offset);
    if (n <= 0) {
      break;
    }
    text.append(buffer, static_cast<size_t>(n));
    offset += n;
  }
  ::close(capture);
  return text;
}

int reportError(llvm::Error error) {
  std::string message = llvm::toString(std::move(error));
  std::replace(message.begin(), message.end(), '\n', ' ');
  // llvm::cl already prefixes its own messages with the tool name.
  llvm::StringRef text(message);
  text.consume_front("kiln: ");
  llvm::errs() << "kiln: error: " << text << "\n";
  return BadInput;
}

llvm::Expected<mlir::OwningOpRef<mlir::ModuleOp>>
loadGraphModule(llvm::StringRef path, mlir::MLIRContext &context) {
  mlir::DialectRegistry registry;
  registerKilnDialects(registry);
  context.appendDialectRegistry(registry);
  context.loadAllAvailableDialects();
  if (path.ends_with(".mlir")) {
    std::string message;
    mlir::ScopedDiagnosticHandler handler(
        &context, [&](mlir::Diagnostic &diag) {
          if (message.empty()) {
            message =
                graph::formatLocation(diag.getLocation()) + ": " + diag.str();
          }
          return mlir::success();
        });
    auto module = mlir::parseSourceFile<mlir::ModuleOp>(path, &context);
    if (!module) {
      return llvm::createStringError(
          message.empty() ? "cannot read '" + path.str() + "'" : message);
    }
    return module;
  }
  auto graph = graph::readGraphFile(path);
  if (!graph) {
    return graph.takeError();
  }
  return graph::importGraph(*graph, context);
}

} // namespace kiln::tool
