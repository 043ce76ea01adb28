//===- World.cpp - the group as the launcher's environment describes it ---===//

#include "runtime/comm/Communicator.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/FormatVariadic.h"

#include <cstdlib>

namespace kiln::comm {

namespace {

const char *variable(const char *name) {
  const char *value = std::getenv(name);
  return value && *value ? value : nullptr;
}

llvm::Error readInt(const char *name, int &out, int low, int high) {
  const char *text = variable(name);
  if (!text) {
    return llvm::Error::success();
  }
  int value = 0;
  if (llvm::StringRef(text).trim().getAsInteger(10, value) || value < low ||
      value > high) {
    return llvm::createStringError(llvm::formatv(
        "{0}='{1}' is not an integer in [{2}, {3}]", name, text, low, high)
                                       .str());
  }
  out = value;
  return llvm::Error::success();
}

} // namespace

Communicator::~Communicator() = default;

std::string World::describe() const {
  return "rank " + std::to_string(rank) + " of " + std::to_string(size);
}

llvm::Expected<World> World::fromEnvironment() {
  World world;
  constexpr int kMaxRanks = 1 << 20;
  // torchrun (and any launcher following its convention) first; mpirun's
  // own variables when those are absent.
  struct Source {
    const char *rank, *size, *localRank, *launcher;
  };
  const Source sources[] = {
      {"RANK", "WORLD_SIZE", "LOCAL_RANK", "env"},
      {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
       "OMPI_COMM_WORLD_LOCAL_RANK", "mpirun"},
      {"PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "mpirun"},
  };
  for (const Source &s : sources) {
    if (!variable(s.rank) && !variable(s.size)) {
      continue;
    }
    if (!variable(s.rank) || !variable(s.size)) {
      return llvm::createStringError(
          llvm::Twine(s.rank) + " and " + s.size +
          " must be set together (only one of them is)");
    }
    if (auto e = readInt(s.size, world.size, 1, kMaxRanks)) {
      return std::move(e);
    }
    if (auto e = readInt(s.rank, world.rank, 0, world.size - 1)) {
      return std::move(e);
    }
    if (auto e = readInt(s.localRank, world.localRank, 0, world.size - 1)) {
      return std::move(e);
    }
    world.launcher = s.launcher;
    break;
  }
  if (world.launcher == "env" && variable("TORCHELASTIC_RUN_ID")) {
    world.launcher = "torchrun";
  }

  // `kiln precompile --world-sizes` collects the graphs of several sizes:
  // while collecting (nothing connects), the group is the size it names.
  const char *collecting = variable("KILN_EXTRACT_GRAPHS_ONLY");
  if (variable("KILN_COLLECT_WORLD_SIZE") && collecting &&
      llvm::StringRef(collecting) == "1") {
    if (auto e = readInt("KILN_COLLECT_WORLD_SIZE", world.size, 1, kMaxRanks)) {
      return std::move(e);
    }
    world.rank %= world.size;
    world.localRank %= world.size;
  }

  int timeoutSeconds = 300;
  if (auto e = readInt("KILN_COMM_TIMEOUT", timeoutSeconds, 1, 86400)) {
    return std::move(e);
  }
  world.timeout = std::chrono::seconds(timeoutSeconds);

  if (const char *rendezvous = variable("KILN_RENDEZVOUS")) {
    llvm::StringRef spec(rendezvous);
    if (!spec.consume_front("file:") || spec.empty()) {
      return llvm::createStringError(
          "KILN_RENDEZVOUS='" + spec +
          "' is not file:<directory on shared storage> (unset it to "
          "rendezvous over TCP at MASTER_ADDR:MASTER_PORT)");
    }
    world.fileStore = spec.str();
    return world;
  }
  if (world.size == 1) {
    return world;
  }
  // Without MASTER_ADDR/MASTER_PORT the group is still described (graph
  // collection needs no peers); connect() is what needs them.
  const char *addr = variable("MASTER_ADDR");
  if (!addr || !variable("MASTER_PORT")) {
    return world;
  }
  world.masterAddr = addr;
  if (auto e = readInt("MASTER_PORT", world.masterPort, 1, 65535)) {
    return std::move(e);
  }
  // Under torchrun's static rendezvous its agent serves its own store on
  // MASTER_PORT, so Kiln's store takes the next port.
  if (llvm::StringRef(variable("TORCHELASTIC_USE_AGENT_STORE")
                          ? variable("TORCHELASTIC_USE_AGENT_STORE")
                          : "")
          .equals_insensitive("true")) {
    if (world.masterPort == 65535) {
      return llvm::createStringError(
          "MASTER_PORT=65535 leaves no port for Kiln's store beside "
          "torchrun's (Kiln uses MASTER_PORT+1)");
    }
    world.masterPort += 1;
  }
  return world;
}

} // namespace kiln::comm

namespace kiln::comm {

llvm::Expected<Layout> Layout::of(int size, int tensorParallel) {
  if (tensorParallel < 1 || size % tensorParallel != 0) {
    return llvm::createStringError(
        "a job of " + std::to_string(size) +
        " workers cannot be laid out in tensor-parallel groups of " +
        std::to_string(tensorParallel) + " (it must divide the world size)");
  }
  return Layout{size, tensorParallel};
}

std::vector<int> Layout::tensorGroup(int rank) const {
  std::vector<int> group;
  int first = rank / tensorParallel * tensorParallel;
  for (int r = first; r < first + tensorParallel; ++r) {
    group.push_back(r);
  }
  return group;
}

std::vector<int> Layout::dataGroup(int rank) const {
  std::vector<int> group;
  for (int r = rank % tensorParallel; r < size; r += tensorParallel) {
    group.push_back(r);
  }
  return group;
}

} // namespace kiln::comm
