//===- GraphRoles.cpp - spelling of input and output roles ---------------===//

#include "compiler/graph/GraphRoles.h"

#include "llvm/ADT/StringSwitch.h"

namespace kiln::graph {

llvm::StringRef inputRoleName(proto::InputRole role) {
  switch (role) {
  case proto::PARAMETER:
    return "parameter";
  case proto::OPTIMIZER_STATE:
    return "optimizer_state";
  case proto::BATCH_INPUT:
    return "batch_input";
  case proto::HYPER_PARAMETER:
    return "hyper_parameter";
  case proto::RNG_SEED:
    return "rng_seed";
  case proto::BUFFER:
    return "buffer";
  default:
    return "unspecified";
  }
}

llvm::StringRef outputRoleName(proto::OutputRole role) {
  switch (role) {
  case proto::LOSS:
    return "loss";
  case proto::METRIC:
    return "metric";
  case proto::UPDATED_PARAMETER:
    return "updated_parameter";
  case proto::UPDATED_STATE:
    return "updated_state";
  default:
    return "unspecified";
  }
}

std::optional<proto::InputRole> parseInputRole(llvm::StringRef name) {
  return llvm::StringSwitch<std::optional<proto::InputRole>>(name)
      .Case("parameter", proto::PARAMETER)
      .Case("optimizer_state", proto::OPTIMIZER_STATE)
      .Case("batch_input", proto::BATCH_INPUT)
      .Case("hyper_parameter", proto::HYPER_PARAMETER)
      .Case("rng_seed", proto::RNG_SEED)
      .Case("buffer", proto::BUFFER)
      .Case("unspecified", proto::INPUT_ROLE_UNSPECIFIED)
      .Default(std::nullopt);
}

std::optional<proto::OutputRole> parseOutputRole(llvm::StringRef name) {
  return llvm::StringSwitch<std::optional<proto::OutputRole>>(name)
      .Case("loss", proto::LOSS)
      .Case("metric", proto::METRIC)
      .Case("updated_parameter", proto::UPDATED_PARAMETER)
      .Case("updated_state", proto::UPDATED_STATE)
      .Case("unspecified", proto::OUTPUT_ROLE_UNSPECIFIED)
      .Default(std::nullopt);
}

} // namespace kiln::graph
