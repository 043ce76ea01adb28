//===- Communicator.h - collectives across data-parallel workers -*- C++ -*-===//
//
// What a worker's simulated NeuronCore uses to run a compiled `collective`
// instruction across the group. The group is described by the launcher's
// environment (torchrun's RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT, mpirun's
// OMPI_*/PMI_* variables) or by a file store on shared storage; connect()
// rendezvous and returns the Gloo backend. Errors are llvm::Errors with one
// line naming the rank and what went wrong: Gloo's exceptions stop here. A
// failed collective also names the ranks it waited for, and every wait is
// bounded by the World's timeout. docs/distributed.md describes it.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_COMM_COMMUNICATOR_H
#define KILN_RUNTIME_COMM_COMMUNICATOR_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace kiln::comm {

enum class Reduction { Sum, Mean };

class Communicator {
public:
  virtual ~Communicator();
  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// Reduces `count` floats in place across the group. Every rank ends with
  /// the same bytes, and for a fixed group size the same bytes on every run
  /// (the ring adds in a fixed order).
  virtual llvm::Error allReduce(float *data, size_t count,
                                Reduction reduction) = 0;
  /// Reduces `count` floats per rank in place across the group (size()
  /// blocks of `count` at `data`) and writes this rank's block of the
  /// reduction to `output`: rank r gets block r.
  virtual llvm::Error reduceScatter(float *data, float *output, size_t count,
                                    Reduction reduction) = 0;
  /// Concatenates every rank's `bytes` bytes at `input`, in rank order, into
  /// `output` (size() * bytes bytes) on every rank.
  virtual llvm::Error allGather(const void *input, void *output,
                                size_t bytes) = 0;
  /// Copies `bytes` bytes from rank `root` to every other rank.
  virtual llvm::Error broadcast(void *data, size_t bytes, int root) = 0;
  virtual llvm::Error barrier() = 0;
  /// The communicator of a group of this group's ranks `members` (in the
  /// new group's rank order), this rank among them: every member calls it
  /// with the same list and `name`, and the ranks outside call it for
  /// their own groups (disjoint from this one). It rendezvous through the
  /// same store and keeps its own connections.
  virtual llvm::Expected<std::unique_ptr<Communicator>>
  subgroup(llvm::ArrayRef<int> members, llvm::StringRef name) = 0;
};

/// A job of `size` workers laid out for tensor parallelism of degree
/// `tensorParallel`: tensor-parallel groups of consecutive ranks (so that
/// one stays inside an instance, as Megatron and neuronx-distributed lay
/// them out), and data-parallel groups of the ranks at one place in theirs.
struct Layout {
  int size = 1;
  int tensorParallel = 1;

  /// The layout, or an error when `tensorParallel` does not divide `size`.
  static llvm::Expected<Layout> of(int size, int tensorParallel);
  int dataParallel() const { return size / tensorParallel; }
  /// The ranks of `rank`'s tensor-parallel and data-parallel groups.
  std::vector<int> tensorGroup(int rank) const;
  std::vector<int> dataGroup(int rank) const;
};

/// Where a worker stands in its group, as its launcher described it.
struct World {
  int rank = 0;
  int size = 1;
  int localRank = 0;
  /// Rendezvous over TCP at masterAddr:masterPort (rank 0 serves it) ...
  std::string masterAddr;
  int masterPort = 0;
  /// ... or through files in this directory on shared storage.
  std::string fileStore;
  /// "torchrun", "mpirun", "env" or "single": who set the variables.
  std::string launcher = "single";
  /// How long any wait for a peer may last: reaching the store, each of
  /// its replies, the rendezvous, each connection and each collective.
  std::chrono::milliseconds timeout{std::chrono::seconds(300)};

  /// Reads RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT (torchrun
  /// or any launcher), else OMPI_COMM_WORLD_* / PMI_* (mpirun), plus
  /// KILN_RENDEZVOUS=file:<dir> and KILN_COMM_TIMEOUT (seconds). No
  /// variables at all is a group of one. Inconsistent ones are an error
  /// naming the variable. A group without an address is described (graph
  /// collection needs no peers); connect() then says what to set.
  static llvm::Expected<World> fromEnvironment();
  /// "rank 2 of 4".
  std::string describe() const;
};

/// Joins the group: rendezvous (naming every rank that did not arrive within
/// the timeout), then a full mesh of Gloo TCP pairs. A group of one needs
/// no peers and connects to nothing.
llvm::Expected<std::unique_ptr<Communicator>> connect(const World &world);

} // namespace kiln::comm

#endif // KILN_RUNTIME_COMM_COMMUNICATOR_H
