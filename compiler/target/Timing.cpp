//===- Timing.cpp - the timing model of machine-model.md ------------------===//
//
// One cost function for the compiler's scheduler and the simulator's
// modelled time, so that what the scheduler plans is what the simulator
// reports.
//
//===----------------------------------------------------------------------===//

#include "compiler/target/Timing.h"

#include <algorithm>

namespace kiln::isa {

namespace {

double engineHz(isa::Engine engine, const target::TargetDescription &t) {
  switch (engine) {
  case isa::Engine::Tensor:
    return t.clocks.tensorHz;
  case isa::Engine::Vector:
    return t.clocks.vectorHz;
  case isa::Engine::Scalar:
    return t.clocks.scalarHz;
  case isa::Engine::GpSimd:
    return t.clocks.gpsimdHz;
  case isa::Engine::Dma:
    return 1;
  }
  return 1;
}

/// Bytes of the longest contiguous run of a tile's rows.
int64_t contiguousRunBytes(const isa::AccessPattern &ap) {
  int64_t inner = ap.strides[ap.rank - 1] == 1 ? ap.sizes[ap.rank - 1] : 1;
  return inner * ap.elementBytes();
}

bool allBF16(const isa::Instruction &inst) {
  for (int i = 0; i < inst.numOperands; ++i) {
    if (inst.operands[i].dtype != isa::DType::BF16) {
      return false;
    }
  }
  return true;
}

} // namespace

double dmaBytes(const Instruction &inst) {
  const AccessPattern &dst = inst.operands[0], &src = inst.operands[1];
  return static_cast<double>(dst.partitions * dst.freeElements() *
                             std::max(dst.elementBytes(), src.elementBytes()));
}

namespace {

/// What a worker's ring step gets: bandwidth and latency per hop.
struct Link {
  double bytesPerSecond;
  double hopSeconds;
};

/// A ring of `n` workers over `link`: an all-reduce of `bytes`, or the
/// reduce-scatter of a `bytes` source or all-gather of a `bytes` result
/// (half of it).
double ringSeconds(bool half, double bytes, int n, const Link &link) {
  if (n <= 1) {
    return 0;
  }
  double steps = (half ? 1.0 : 2.0) * (n - 1);
  return steps / n * bytes / link.bytesPerSecond + steps * link.hopSeconds;
}

} // namespace

/// machine-model.md, "Collectives across a cluster": ranks are placed in
/// order (rank r on core r mod coresPerInstance of instance r /
/// coresPerInstance, tensor-parallel groups innermost), so a group's
/// stride and size say where it lies. Every worker of the job runs the
/// instruction at once, each in its own group: a chip's link is shared by
/// all of its cores in the job, an instance's EFA by all of its workers.
double collectiveSeconds(const Instruction &inst,
                         const target::TargetDescription &t,
                         const GroupSizes &groups) {
  const AccessPattern &src = inst.operands[1];
  double bytes = static_cast<double>(src.partitions * src.freeElements() *
                                     src.elementBytes());
  CollectiveGroup group = collectiveGroupOf(inst);
  int n = groups.of(group);
  if (n <= 1) {
    return 0;
  }
  auto kind = static_cast<CollectiveKind>(inst.op0);
  if (kind == CollectiveKind::WorkerShard) {
    // A copy within the worker's own HBM.
    return t.dmaFixedLatencySeconds + bytes / n / t.dmaBytesPerSecondPerQueue;
  }
  // The whole buffer the ring moves: a gather's result is n sources.
  if (kind == CollectiveKind::AllGather) {
    bytes *= n;
  }
  bool half = kind != CollectiveKind::AllReduceSum &&
              kind != CollectiveKind::AllReduceMean;
  int64_t stride = group == CollectiveGroup::Tensor ? 1 : groups.tensor;
  int64_t job = static_cast<int64_t>(groups.data) * groups.tensor;
  int64_t span = (n - 1) * stride + 1;
  int64_t chipCores = t.coresPerChip;
  if (span <= chipCores) {
    Link chip{t.chipCopyBytesPerSecond / chipCores, t.chipHopLatencySeconds};
    return ringSeconds(half, bytes, n, chip);
  }
  Link instance{t.linkBytesPerSecond / std::min(chipCores, job),
                t.collectiveHopLatencySeconds};
  if (span <= t.coresPerInstance) {
    return ringSeconds(half, bytes, n, instance);
  }
  // Hierarchically: reduce-scatter inside each instance among its k
  // workers of the group, a ring across the i instances of each worker's
  // shard, all-gather inside each instance.
  int k = static_cast<int>(std::max<int64_t>(1, t.coresPerInstance / stride));
  int i = std::max(1, n / k);
  Link efa{t.efaBytesPerSecond / std::min<int64_t>(t.coresPerInstance, job),
           t.efaHopLatencySeconds};
  double inside = ringSeconds(true, bytes, k, instance);
  double across = ringSeconds(half, bytes / k, i, efa);
  // A reduce-scatter ends after its reduce half; an all-gather only has
  // its gather half; an all-reduce has both.
  return kind == CollectiveKind::AllReduceSum ||
                 kind == CollectiveKind::AllReduceMean
             ? 2 * inside + across
             : inside + across;
}

double instructionSeconds(const isa::Instruction &inst,
                          const target::TargetDescription &t,
                          const GroupSizes &groups) {
  const isa::AccessPattern &dst = inst.operands[0];
  auto src = [&](int i) -> const isa::AccessPattern & {
    return inst.operands[i];
  };
  double n = static_cast<double>(inst.numOperands > 1 ? src(1).freeElements()
                                                      : dst.freeElements());
  double cycles = 0;
  auto op = static_cast<isa::AluOp>(inst.op0);
  switch (inst.opcode) {
  case isa::Opcode::Matmul: {
    double m = static_cast<double>(src(1).freeElements());
    double cols = static_cast<double>(src(2).freeElements());
    cycles = std::max(std::min(64.0, m), cols);
    if (src(1).dtype == isa::DType::F32) {
      cycles *= t.fp32MatmulSlowdown;
    }
    break;
  }
  case isa::Opcode::Transpose:
    cycles =
        std::max(static_cast<double>(src(1).partitions),
                 std::min(64.0, static_cast<double>(src(1).freeElements())));
    break;
  case isa::Opcode::Activation:
    cycles = static_cast<isa::ActFunc>(inst.op0) == isa::ActFunc::Reciprocal
                 ? 8 * n
                 : std::max(64.0, n);
    break;
  case isa::Opcode::TensorScalar:
  case isa::Opcode::TensorCopy:
  case isa::Opcode::Memset:
    cycles = std::max(64.0, n);
    break;
  case isa::Opcode::TensorTensor: {
    bool psumInput = src(1).memory == isa::Memory::Psum ||
                     src(2).memory == isa::Memory::Psum;
    bool fastBf16 =
        allBF16(inst) && (op == isa::AluOp::Add || op == isa::AluOp::Sub ||
                          op == isa::AluOp::Mul);
    cycles = (psumInput || fastBf16) ? n : t.tensorTensorCyclesPerElement * n;
    break;
  }
  case isa::Opcode::TensorReduce:
    cycles = (src(1).dtype == isa::DType::BF16 &&
              (op == isa::AluOp::Add || op == isa::AluOp::Max))
                 ? n / 2
                 : n;
    break;
  case isa::Opcode::Random: // assumed: a counter hash per element, like iota
    cycles = 150 + static_cast<double>(dst.freeElements());
    break;
  case isa::Opcode::Iota:
  case isa::Opcode::AffineSelect:
  case isa::Opcode::PartitionReduce:
  case isa::Opcode::PartitionBroadcast:
    cycles = 150 + n;
    break;
  case isa::Opcode::DmaCopy:
  case isa::Opcode::DmaGather:
  case isa::Opcode::DmaScatter: {
    double bytes = dmaBytes(inst);
    int64_t run = std::min(contiguousRunBytes(dst), contiguousRunBytes(src(1)));
    double bandwidth = t.dmaBytesPerSecondPerQueue;
    if (bytes < t.dmaSmallTransferBytes || run < t.dmaMinEfficientRunBytes) {
      bandwidth /= 2;
    }
    return t.dmaFixedLatencySeconds + bytes / bandwidth;
  }
  case isa::Opcode::Collective:
    return collectiveSeconds(inst, t, groups);
  }
  return (cycles + t.instructionOverheadCycles) / engineHz(inst.engine, t);
}

double streamSeconds(const Instruction &inst,
                     const target::TargetDescription &t,
                     const GroupSizes &groups) {
  double seconds = instructionSeconds(inst, t, groups);
  return isTransfer(inst.opcode) && !t.dmaLatencyHoldsQueue
             ? seconds - t.dmaFixedLatencySeconds
             : seconds;
}

unsigned sharedPorts(const Instruction &inst,
                     const target::TargetDescription &t) {
  return sharedPorts(inst, inst.engine, t);
}

unsigned sharedPorts(const Instruction &inst, Engine engine,
                     const target::TargetDescription &t) {
  auto touches = [&](Memory memory) {
    for (int i = 0; i < inst.numOperands; ++i) {
      if (inst.operands[i].memory == memory) {
        return true;
      }
    }
    return false;
  };
  unsigned ports = 0;
  if (t.vectorGpsimdShareSbufPort &&
      (engine == Engine::Vector || engine == Engine::GpSimd) &&
      touches(Memory::Sbuf)) {
    ports |= kSbufPort;
  }
  if (t.vectorScalarSharePsumPort &&
      (engine == Engine::Vector || engine == Engine::Scalar) &&
      touches(Memory::Psum)) {
    ports |= kPsumPort;
  }
  return ports;
}

} // namespace kiln::isa
