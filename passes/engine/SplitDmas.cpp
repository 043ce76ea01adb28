//===- SplitDmas.cpp - spread a large transfer over DMA queues ------------===//
//
// A queue moves ~27 GiB/s, so one 2 MiB tile load takes ~75 us on one
// queue while fifteen others may sit idle; when the tile is on the step's
// critical path (a matmul waits for every K slice), that is time no
// scheduling can win back. A transfer this large is cut along its
// partitions into pieces the scheduler places on queues of their own. Each
// piece still moves enough bytes that its fixed cost stays small.
//
//===----------------------------------------------------------------------===//

#include "passes/engine/Engine.h"

#include "llvm/Support/MathExtras.h"

#include <algorithm>

namespace kiln::engine_passes {

namespace {

/// Partitions [first, first + count) of a pattern: SBUF rows, or HBM rows
/// `partitionStride` elements apart.
isa::AccessPattern partitionsOf(const isa::AccessPattern &ap, int64_t first,
                                int64_t count) {
  isa::AccessPattern piece = ap;
  piece.partitions = static_cast<uint16_t>(count);
  if (ap.memory == isa::Memory::Hbm) {
    piece.offset += first * ap.partitionStride * ap.elementBytes();
  } else {
    piece.partition = static_cast<uint16_t>(ap.partition + first);
  }
  return piece;
}

} // namespace

llvm::SmallVector<isa::Instruction, 4>
splitLargeDma(const isa::Instruction &inst, int64_t pieceBytes,
              int maxPieces) {
  if (inst.opcode != isa::Opcode::DmaCopy || inst.numOperands != 2) {
    return {inst};
  }
  const isa::AccessPattern &dst = inst.operands[0], &src = inst.operands[1];
  int64_t bytes = dst.partitions * dst.freeElements() * dst.elementBytes();
  int64_t pieces =
      std::min<int64_t>({maxPieces, bytes / pieceBytes, dst.partitions});
  if (pieces < 2 || src.partitions != dst.partitions ||
      src.freeElements() != dst.freeElements()) {
    return {inst};
  }
  // A piece of 32 partitions or fewer must start at a multiple of 32, of
  // 33-64 at 0 or 64 (the ISA verifier, Isa.cpp): pieces are whole
  // 32-partition groups of an aligned tile.
  auto aligned = [](const isa::AccessPattern &ap) {
    return ap.memory == isa::Memory::Hbm || ap.partition % 32 == 0;
  };
  if (!aligned(dst) || !aligned(src)) {
    return {inst};
  }
  int64_t per = llvm::alignTo((dst.partitions + pieces - 1) / pieces, 32);
  if (per >= dst.partitions) {
    return {inst};
  }
  llvm::SmallVector<isa::Instruction, 4> result;
  for (int64_t first = 0; first < dst.partitions; first += per) {
    int64_t count = std::min<int64_t>(per, dst.partitions - first);
    isa::Instruction piece = inst;
    piece.operands[0] = partitionsOf(dst, first, count);
    piece.operands[1] = partitionsOf(src, first, count);
    result.push_back(piece);
  }
  return result;
}

} // namespace kiln::engine_passes
