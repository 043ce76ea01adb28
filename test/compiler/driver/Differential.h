//===- Differential.h - compiled step vs reference interpreter --*- C++ -*-===//
//
// Compiles a graph, runs it on the simulator with the hazard checker on,
// runs the reference interpreter on the same inputs, and compares every
// output. Used by the op-by-op tests, the random-graph test and the
// training-step tests.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TEST_COMPILER_DRIVER_DIFFERENTIAL_H
#define KILN_TEST_COMPILER_DRIVER_DIFFERENTIAL_H

#include "compiler/target/CompileOptions.h"
#include "compiler/graph/kgraph.pb.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Error.h"

#include <string>

namespace kiln::testing {

struct Range {
  double lo = -1.0, hi = 1.0;
};

struct DiffOptions {
  CompileOptions compile;
  uint64_t seed = 1;
  /// Inputs drawn uniformly from a range: floats from `floats`, integers
  /// from `integers` (rounded down), unless `ranges` names the input.
  Range floats{-1.0, 1.0}, integers{0.0, 4.0};
  llvm::StringMap<Range> ranges;
  /// An element passes when |sim - ref| <= atol + rtol * |ref|.
  double rtol = 1e-5, atol = 1e-6;

  /// Compiles with `--auto-cast=bf16` from then on and judges elements by
  /// `absolute` alone: a bf16 rounding's error scales with the operands,
  /// not with the (possibly cancelled) result.
  void autoCastBf16(double absolute) {
    compile.autoCast = "bf16";
    rtol = 0;
    atol = absolute;
  }
};

struct DiffReport {
  size_t instructions = 0;
  size_t hazards = 0;
  double worstExcess = 0; // max |sim - ref| / (atol + rtol |ref|); <= 1 passes
  std::string worst;      // "output[index]: sim vs ref"
  double modelledSeconds = 0;
  uint64_t hbmBytes = 0; // the artifact's HBM plan
  bool passed() const { return hazards == 0 && worstExcess <= 1.0; }
};

llvm::Expected<DiffReport> compileAndCompare(const proto::Graph &graph,
                                             const DiffOptions &options);

} // namespace kiln::testing

#endif // KILN_TEST_COMPILER_DRIVER_DIFFERENTIAL_H
