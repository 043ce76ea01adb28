//===- CompileCommand.cpp - kiln compile ----------------------------------===//

#include "tools/kiln/Commands.h"
#include "tools/kiln/ToolSupport.h"

#include "compiler/driver/Compiler.h"
#include "compiler/emit/ArtifactEmission.h"

#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

namespace cl = llvm::cl;
using namespace kiln;
using namespace kiln::tool;

namespace {

cl::SubCommand compileCommand(
    "compile", "Compile a graph (.kgraph.pb or kgraph .mlir) to a .kneff "
               "artifact; options also come from KILN_CC_FLAGS");
cl::opt<std::string> input(cl::Positional, cl::desc("<graph>"), cl::Required,
                           cl::sub(compileCommand));
cl::opt<std::string> output("o",
                            cl::desc("Output (.kneff, or IR with --compile-to; "
                                     "default: stdout for IR)"),
                            cl::sub(compileCommand));
/// One string option per compile option of the table (and one for its
/// prefix spelling, -O2), handed to CompileOptions::parse like every other
/// source of compile flags.
struct CompileOptionFlag {
  const CompileOptionInfo *option;
  std::unique_ptr<cl::opt<std::string>> flag;
};

std::vector<CompileOptionFlag> &compileOptionFlags() {
  static std::vector<CompileOptionFlag> flags = [] {
    std::vector<CompileOptionFlag> made;
    for (const CompileOptionInfo &option : compileOptionTable()) {
      made.push_back({&option, std::make_unique<cl::opt<std::string>>(
                                   llvm::StringRef(option.name), cl::desc(option.help),
                                   cl::value_desc(option.valueName),
                                   cl::sub(compileCommand))});
      if (!option.prefix.empty()) {
        made.push_back(
            {&option, std::make_unique<cl::opt<std::string>>(
                          llvm::StringRef(option.prefix),
                          cl::desc(option.help),
                          cl::value_desc(option.valueName), cl::Prefix,
                          cl::sub(compileCommand))});
      }
    }
    return made;
  }();
  return flags;
}
[[maybe_unused]] const bool compileOptionsRegistered =
    !compileOptionFlags().empty();

cl::opt<std::string> compileTo(
    "compile-to",
    cl::desc("Stop after a phase and print its IR: import, graph, tile, "
             "engine (emit writes the artifact)"),
    cl::init("emit"), cl::sub(compileCommand));
cl::opt<bool> timing("timing", cl::desc("Print each pass's time to stderr"),
                     cl::sub(compileCommand));
cl::opt<bool> verifyEach(
    "verify-each",
    cl::desc("Verify the IR after every pass (to find a compiler bug; "
             "otherwise the imported graph and the result are verified)"),
    cl::sub(compileCommand));

llvm::Expected<CompileOptions> options() {
  auto opts = CompileOptions::fromEnvironment(CompileOptions{});
  if (!opts) {
    return opts.takeError();
  }
  std::vector<std::string> flags;
  for (const CompileOptionFlag &given : compileOptionFlags()) {
    if (given.flag->getNumOccurrences()) {
      flags.push_back("--" + given.option->name.str() + "=" +
                      given.flag->getValue());
    }
  }
  return CompileOptions::parse(flags, *opts);
}

llvm::Error writeOutput(llvm::StringRef path,
                        llvm::function_ref<void(llvm::raw_ostream &)> write) {
  if (path.empty() || path == "-") {
    write(llvm::outs());
    return llvm::Error::success();
  }
  // A temporary file renamed into place: no reader sees a partial output.
  if (llvm::Error err = llvm::writeToOutput(path, [&](llvm::raw_ostream &out) {
        write(out);
        return llvm::Error::success();
      })) {
    return llvm::createStringError("cannot write '" + path +
                                   "': " + llvm::toString(std::move(err)));
  }
  return llvm::Error::success();
}

int finish(llvm::Error error) {
  return error ? reportError(std::move(error)) : Success;
}

int runCompile() {
  auto opts = options();
  if (!opts) {
    return reportError(opts.takeError());
  }
  std::optional<Phase> last = phaseNamed(compileTo);
  if (!last) {
    return reportError(llvm::createStringError(
        "--compile-to: '" + compileTo +
        "' is not one of import, graph, tile, engine, emit"));
  }
  if (*last == Phase::Emit && output.empty()) {
    return reportError(
        llvm::createStringError("-o is required to write an artifact"));
  }
  mlir::MLIRContext context(mlir::MLIRContext::Threading::DISABLED);
  prepareContext(context);
  auto module = loadGraphModule(input, context);
  if (!module) {
    return reportError(module.takeError());
  }
  CompileHooks hooks;
  hooks.timing = timing ? &llvm::errs() : nullptr;
  hooks.verifyEachPass = verifyEach;
  if (auto error = lowerModule(**module, *opts, *last, hooks)) {
    return reportError(llvm::createStringError(
        "cannot compile '" + input + "': " + llvm::toString(std::move(error))));
  }
  if (*last != Phase::Emit) {
    return finish(writeOutput(
        output, [&](llvm::raw_ostream &os) { module->get()->print(os); }));
  }
  auto program = emit::getProgram(**module);
  if (!program) {
    return reportError(program.takeError());
  }
  auto artifact = emit::assembleProgram(*program);
  if (!artifact) {
    return reportError(artifact.takeError());
  }
  std::string bytes = artifact::writeArtifact(*artifact);
  return finish(
      writeOutput(output, [&](llvm::raw_ostream &os) { os << bytes; }));
}

CommandRegistration registration(compileCommand, runCompile);

} // namespace
