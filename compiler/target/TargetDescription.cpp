//===- TargetDescription.cpp - trn1 and trn2 ------------------------------===//
//
// Sources: machine-model.md, which cites AWS's Neuron architecture guides, the
// NKI ISA reference and the NKI performance guide. "assumed" marks our own
// plausible choices.
//
//===----------------------------------------------------------------------===//

#include "compiler/target/TargetDescription.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"

#include <array>
#include <cassert>
#include <deque>
#include <mutex>
#include <string>

namespace kiln::target {

namespace {

constexpr double kKiB = 1024.0, kGiB = 1024.0 * 1024.0 * 1024.0;

TargetDescription makeTrn1() {
  TargetDescription t;
  t.name = "trn1";
  t.coreName = "NeuronCore-v2";
  t.sbufBytesPerPartition = 192 * 1024;
  t.psumBytesPerPartition = 16 * 1024;
  t.psumBanks = 8;
  t.psumBankBytes = 2 * 1024;
  t.hbmBytesPerChip = published(32 * kGiB);
  t.hbmBytesPerSecond = published(820e9);
  t.coresPerChip = 2;
  t.clocks = {published(2.8e9), published(1.12e9), published(1.4e9),
              published(1.4e9)};
  t.tensorFlopsBf16 = published(92e12);
  t.tensorFlopsFp32 = published(23e12);
  t.chipPeakFlopsBf16 = published(190e12);
  t.instructionOverheadCycles = published(60);
  t.fp32MatmulSlowdown = published(4);
  t.tensorTensorCyclesPerElement = published(2);
  t.dmaBytesPerSecondPerQueue = published(27 * kGiB);
  t.dmaFixedLatencySeconds = assumed(2e-6);
  t.dmaSmallTransferBytes = assumed(32 * kKiB);
  t.dmaMinEfficientRunBytes = assumed(512);
  t.coresPerInstance = 32; // trn1.32xlarge: 16 chips
  t.chipCopyBytesPerSecond = assumed(820e9);
  t.chipHopLatencySeconds = assumed(2e-6);
  t.linkBytesPerSecond = published(384e9);
  t.collectiveHopLatencySeconds = assumed(10e-6);
  t.efaBytesPerSecond = published(100e9); // 800 Gbps
  t.efaHopLatencySeconds = assumed(30e-6);
  t.semaphores = assumed(32);
  return t;
}

TargetDescription makeTrn2() {
  TargetDescription t = makeTrn1();
  t.name = "trn2";
  t.coreName = "NeuronCore-v3";
  t.sbufBytesPerPartition = 224 * 1024;
  t.hbmBytesPerChip = published(96 * kGiB);
  t.hbmBytesPerSecond = published(2.9e12);
  t.coresPerChip = 8;
  t.clocks = {published(2.4e9), published(0.96e9), published(1.2e9),
              published(1.2e9)};
  t.tensorFlopsBf16 = published(79e12);
  t.tensorFlopsFp32 = published(20e12);
  t.chipPeakFlopsBf16 = published(667e12);
  // machine-model.md gives no trn2 link figure; NeuronLink-v3 is faster than
  // trn1's, and we assume twice its bandwidth until a published figure is in.
  t.linkBytesPerSecond = assumed(768e9);
  t.coresPerInstance = 64; // trn2.48xlarge, as machine-model.md places ranks
  t.chipCopyBytesPerSecond = assumed(2.9e12);
  // machine-model.md states the shared ports for trn1 only.
  t.vectorGpsimdShareSbufPort = false;
  t.vectorScalarSharePsumPort = false;
  return t;
}

const std::array<TargetDescription, 2> &targets() {
  static const std::array<TargetDescription, 2> all = {makeTrn1(), makeTrn2()};
  return all;
}

/// Variants registered by name (registerVariant). A deque keeps each
/// entry, and so each name a TargetDescription refers to, in place.
struct Variant {
  std::string name;
  TargetDescription target;
};

struct VariantRegistry {
  std::mutex mutex;
  std::deque<Variant> variants;
};

VariantRegistry &variantRegistry() {
  static VariantRegistry registry;
  return registry;
}

void row(llvm::raw_ostream &os, llvm::StringRef what, const llvm::Twine &value,
         bool isAssumed) {
  os << llvm::format("  %-44s %-30s %s\n", what.str().c_str(),
                     value.str().c_str(), isAssumed ? "assumed" : "published");
}

std::string si(double value, llvm::StringRef unit) {
  const char *prefixes[] = {"", "K", "M", "G", "T", "P"};
  int i = 0;
  while (value >= 1000 && i < 5) {
    value /= 1000;
    ++i;
  }
  return llvm::formatv("{0:G} {1}{2}", value, prefixes[i], unit).str();
}

} // namespace

llvm::ArrayRef<TargetDescription> allTargets() { return targets(); }

const TargetDescription &defaultTarget() { return targets().front(); }

const TargetDescription *lookupTarget(llvm::StringRef name) {
  for (const TargetDescription &t : targets()) {
    if (t.name == name) {
      return &t;
    }
  }
  VariantRegistry &registry = variantRegistry();
  std::lock_guard<std::mutex> lock(registry.mutex);
  for (const Variant &v : registry.variants) {
    if (v.target.name == name) {
      return &v.target;
    }
  }
  return nullptr;
}

const TargetDescription &registerVariant(llvm::StringRef name,
                                         TargetDescription variant) {
  assert(!lookupTarget(name) && "a target of that name exists already");
  VariantRegistry &registry = variantRegistry();
  std::lock_guard<std::mutex> lock(registry.mutex);
  Variant &entry =
      registry.variants.emplace_back(Variant{name.str(), std::move(variant)});
  entry.target.name = entry.name;
  return entry.target;
}

void printTarget(llvm::raw_ostream &os, const TargetDescription &t) {
  os << t.name << " (" << t.coreName << ")\n";
  row(os, "partitions", llvm::Twine(t.partitions), false);
  row(os, "SBUF per partition / total",
      llvm::Twine(t.sbufBytesPerPartition / 1024) + " KiB / " +
          llvm::Twine(t.sbufBytes() / (1024 * 1024)) + " MiB",
      false);
  row(os, "PSUM per partition / banks x bank size",
      llvm::Twine(t.psumBytesPerPartition / 1024) + " KiB / " +
          llvm::Twine(t.psumBanks) + " x " + llvm::Twine(t.psumBankBytes) +
          " B",
      false);
  row(os, "TensorE clock", si(t.clocks.tensorHz, "Hz"),
      t.clocks.tensorHz.assumed);
  row(os, "VectorE clock", si(t.clocks.vectorHz, "Hz"),
      t.clocks.vectorHz.assumed);
  row(os, "ScalarE clock", si(t.clocks.scalarHz, "Hz"),
      t.clocks.scalarHz.assumed);
  row(os, "GpSimd clock", si(t.clocks.gpsimdHz, "Hz"),
      t.clocks.gpsimdHz.assumed);
  row(os, "TensorE bf16 / fp32",
      si(t.tensorFlopsBf16, "FLOPS") + " / " + si(t.tensorFlopsFp32, "FLOPS"),
      false);
  row(os, "chip peak bf16 (cores per chip)",
      si(t.chipPeakFlopsBf16, "FLOPS") + " (" + llvm::Twine(t.coresPerChip) +
          ")",
      false);
  row(os, "matmul limits K x M x N",
      llvm::Twine(t.matmulMaxK) + " x " + llvm::Twine(t.matmulMaxM) + " x " +
          llvm::Twine(t.matmulMaxN),
      false);
  row(os, "free elements per instruction SBUF / PSUM",
      llvm::Twine(t.maxFreeElementsSbuf) + " / " +
          llvm::Twine(t.maxFreeElementsPsum),
      false);
  row(os, "fixed instruction overhead (cycles)",
      llvm::Twine(static_cast<int64_t>(t.instructionOverheadCycles)),
      t.instructionOverheadCycles.assumed);
  row(os, "HBM per chip / bandwidth",
      si(t.hbmBytesPerChip, "B") + " / " + si(t.hbmBytesPerSecond, "B/s"),
      t.hbmBytesPerSecond.assumed);
  row(os, "HBM a program may plan (a core's share)",
      si(static_cast<double>(t.hbmBytesPerCore()), "B"),
      t.hbmBytesPerChip.assumed);
  row(os, "DMA queues x bandwidth",
      llvm::Twine(t.dmaQueues) + " x " + si(t.dmaBytesPerSecondPerQueue, "B/s"),
      t.dmaBytesPerSecondPerQueue.assumed);
  row(os, "tensor_tensor cycles per element",
      llvm::Twine(static_cast<int64_t>(t.tensorTensorCyclesPerElement)),
      t.tensorTensorCyclesPerElement.assumed);
  row(os, "DMA fixed latency",
      si(t.dmaFixedLatencySeconds * 1e6, "us") +
          (t.dmaLatencyHoldsQueue ? ", holds its queue"
                                  : ", overlaps the next transfer"),
      t.dmaFixedLatencySeconds.assumed);
  row(os, "DMA half-bandwidth below (transfer / run)",
      si(t.dmaSmallTransferBytes, "B") + " / " +
          si(t.dmaMinEfficientRunBytes, "B"),
      t.dmaSmallTransferBytes.assumed);
  row(os, "cores per instance", llvm::Twine(t.coresPerInstance), false);
  row(os, "collectives inside a chip: bandwidth per chip",
      si(t.chipCopyBytesPerSecond, "B/s"), t.chipCopyBytesPerSecond.assumed);
  row(os, "collectives inside a chip: latency per hop",
      si(t.chipHopLatencySeconds * 1e6, "us"), t.chipHopLatencySeconds.assumed);
  row(os, "collective link bandwidth", si(t.linkBytesPerSecond, "B/s"),
      t.linkBytesPerSecond.assumed);
  row(os, "collective latency per hop",
      si(t.collectiveHopLatencySeconds * 1e6, "us"),
      t.collectiveHopLatencySeconds.assumed);
  row(os, "collectives across instances: EFA per instance",
      si(t.efaBytesPerSecond, "B/s"), t.efaBytesPerSecond.assumed);
  row(os, "collectives across instances: latency per hop",
      si(t.efaHopLatencySeconds * 1e6, "us"), t.efaHopLatencySeconds.assumed);
  row(os, "semaphores", llvm::Twine(static_cast<int64_t>(t.semaphores)),
      t.semaphores.assumed);
}

} // namespace kiln::target
