//===- TargetDescription.h - the NeuronCore targets Kiln compiles for -*- C++
//-*-===//
//
// Every figure of ../shared/design/machine-model.md, in one place, for the
// compiler, the artifact loader, the simulator and its timing model. Each
// figure knows whether it is published (AWS's Neuron documentation) or
// assumed (ours), so that anything printing it can say which.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_COMPILER_TARGET_TARGETDESCRIPTION_H
#define KILN_COMPILER_TARGET_TARGETDESCRIPTION_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>

namespace kiln::target {

/// A number with its provenance.
struct Figure {
  double value = 0;
  bool assumed = false;
  operator double() const { return value; }
};

inline Figure published(double v) { return {v, false}; }
inline Figure assumed(double v) { return {v, true}; }

struct EngineClocks {
  Figure tensorHz, vectorHz, scalarHz, gpsimdHz;
};

struct TargetDescription {
  llvm::StringRef name;     // "trn1"
  llvm::StringRef coreName; // "NeuronCore-v2"

  // Memories.
  int64_t partitions = 128;
  int64_t sbufBytesPerPartition = 0;
  int64_t psumBytesPerPartition = 0;
  int64_t psumBanks = 0;
  int64_t psumBankBytes = 0;
  Figure hbmBytesPerChip, hbmBytesPerSecond;
  int64_t coresPerChip = 0;

  // Engines and instruction limits.
  EngineClocks clocks;
  Figure tensorFlopsBf16, tensorFlopsFp32, chipPeakFlopsBf16;
  int64_t matmulMaxK = 128, matmulMaxM = 128, matmulMaxN = 512;
  int64_t transposeMax = 128;
  int64_t maxFreeElementsSbuf = 64 * 1024;
  int64_t maxFreeElementsPsum = 4 * 1024;
  int64_t gpsimdCores = 8;
  int64_t gpsimdLocalBytes = 64 * 1024;

  // Cost model (cycles in the engine's own clock).
  Figure instructionOverheadCycles;
  int64_t matmulMinRows = 64;
  Figure fp32MatmulSlowdown;
  /// tensor_tensor cycles per element unless an input is in PSUM or it is an
  /// all-bf16 add, sub or mul (then one).
  Figure tensorTensorCyclesPerElement;

  // DMA.
  int64_t dmaQueues = 16;
  Figure dmaBytesPerSecondPerQueue;
  Figure dmaFixedLatencySeconds;
  /// Whether a transfer's fixed latency holds its queue, as the bytes do
  /// (our reading of machine-model.md's "fixed 2 us latency + bytes / 27
  /// GiB/s on its queue"), or only delays its completion while the queue
  /// starts the next transfer (a what-if: kiln-bench-compile --what-if).
  bool dmaLatencyHoldsQueue = true;
  Figure dmaSmallTransferBytes;   // below this, half bandwidth
  Figure dmaMinEfficientRunBytes; // element runs below this, half bandwidth

  // Collectives (machine-model.md, "Collectives across a cluster"): what a
  // worker's ring step gets where its group lies. Inside one chip, a copy
  // between its cores' HBM; inside one instance, NeuronLink (per chip);
  // across instances, EFA (per instance).
  int64_t coresPerInstance = 0;
  Figure chipCopyBytesPerSecond;
  Figure chipHopLatencySeconds;
  Figure linkBytesPerSecond;
  Figure collectiveHopLatencySeconds;
  Figure efaBytesPerSecond;
  Figure efaHopLatencySeconds;

  // Synchronisation.
  Figure semaphores;

  // trn1: VectorE and GpSimd cannot use SBUF in the same cycle, nor VectorE
  // and ScalarE PSUM; the timing model serialises such instructions.
  bool vectorGpsimdShareSbufPort = true;
  bool vectorScalarSharePsumPort = true;

  /// Peak bf16 FLOPS of one core (the MFU denominator).
  double corePeakFlopsBf16() const {
    return chipPeakFlopsBf16 / static_cast<double>(coresPerChip);
  }
  /// One core's share of its chip's HBM: what a program (one worker) may
  /// plan, since every core of the chip runs a worker of its own.
  int64_t hbmBytesPerCore() const {
    return static_cast<int64_t>(hbmBytesPerChip.value) / coresPerChip;
  }
  int64_t sbufBytes() const { return partitions * sbufBytesPerPartition; }
  int64_t psumBytes() const { return partitions * psumBytesPerPartition; }
};

/// Every target Kiln knows, default first.
llvm::ArrayRef<TargetDescription> allTargets();
/// The default target (trn1).
const TargetDescription &defaultTarget();
/// The target of that name (a built-in one or a registered variant), or
/// null.
const TargetDescription *lookupTarget(llvm::StringRef name);
/// Makes `variant` known to this process as `name` (new, not a built-in
/// target's) until it exits: compiles for it and artifacts naming it
/// simulate on it. A variant lifts one of a real target's limits so that a
/// benchmark can compile and model a step without it (kiln-bench-compile
/// --what-if); artifacts for a variant mean nothing to another process.
/// Thread-safe; the reference stays valid.
const TargetDescription &registerVariant(llvm::StringRef name,
                                         TargetDescription variant);
/// A readable table of the target's figures, each marked published/assumed.
void printTarget(llvm::raw_ostream &os, const TargetDescription &target);

} // namespace kiln::target

#endif // KILN_COMPILER_TARGET_TARGETDESCRIPTION_H
