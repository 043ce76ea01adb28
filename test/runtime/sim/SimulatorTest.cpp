//===- SimulatorTest.cpp - the timing model's cost formulas --------------===//
//
// Each formula of machine-model.md's cost table, pinned on trn1, and the
// simulator's what-if variants of it.
//
//===----------------------------------------------------------------------===//

#include "runtime/sim/Simulator.h"

#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <optional>
#include <tuple>

using namespace kiln;

namespace {

isa::AccessPattern tile(isa::Memory memory, int64_t partitions, int64_t free,
                        isa::DType dtype = isa::DType::F32) {
  isa::AccessPattern ap;
  ap.memory = memory;
  ap.dtype = dtype;
  ap.partitions = static_cast<uint16_t>(partitions);
  ap.rank = 1;
  ap.strides[0] = 1;
  ap.sizes[0] = free;
  ap.partitionStride = free;
  return ap;
}

isa::Instruction make(isa::Opcode opcode, isa::Engine engine,
                      std::initializer_list<isa::AccessPattern> operands) {
  isa::Instruction inst;
  inst.opcode = opcode;
  inst.engine = engine;
  for (const isa::AccessPattern &ap : operands) {
    inst.operands[inst.numOperands++] = ap;
  }
  return inst;
}

const target::TargetDescription &trn1 = *target::lookupTarget("trn1");
constexpr double kTensorHz = 2.8e9, kVectorHz = 1.12e9, kScalarHz = 1.4e9,
                 kGpsimdHz = 1.4e9, kOverhead = 60;

double seconds(const isa::Instruction &inst, int world = 1) {
  return sim::instructionSeconds(inst, trn1, world);
}

using isa::DType;
using isa::Engine;
using isa::Memory;
using isa::Opcode;

TEST(CostModel, Matmul) {
  // max(min(64, M), N) cycles; x4 for f32 inputs.
  auto mm = [](int64_t m, int64_t n, DType d) {
    return make(Opcode::Matmul, Engine::Tensor,
                {tile(Memory::Psum, m, n), tile(Memory::Sbuf, 128, m, d),
                 tile(Memory::Sbuf, 128, n, d)});
  };
  EXPECT_DOUBLE_EQ(seconds(mm(128, 512, DType::BF16)),
                   (512 + kOverhead) / kTensorHz);
  EXPECT_DOUBLE_EQ(seconds(mm(128, 16, DType::BF16)),
                   (64 + kOverhead) / kTensorHz);
  EXPECT_DOUBLE_EQ(seconds(mm(32, 16, DType::BF16)),
                   (32 + kOverhead) / kTensorHz);
  EXPECT_DOUBLE_EQ(seconds(mm(128, 512, DType::F32)),
                   (4 * 512 + kOverhead) / kTensorHz);
}

TEST(CostModel, TransposeAndScalarEngine) {
  EXPECT_DOUBLE_EQ(
      seconds(make(Opcode::Transpose, Engine::Tensor,
                   {tile(Memory::Psum, 32, 128), tile(Memory::Sbuf, 128, 32)})),
      (128 + kOverhead) / kTensorHz);
  auto act = make(Opcode::Activation, Engine::Scalar,
                  {tile(Memory::Sbuf, 128, 30), tile(Memory::Sbuf, 128, 30)});
  EXPECT_DOUBLE_EQ(seconds(act), (64 + kOverhead) / kScalarHz);
  act.operands[0].sizes[0] = act.operands[1].sizes[0] = 1000;
  EXPECT_DOUBLE_EQ(seconds(act), (1000 + kOverhead) / kScalarHz);
  act.op0 = static_cast<uint8_t>(isa::ActFunc::Reciprocal);
  EXPECT_DOUBLE_EQ(seconds(act), (8 * 1000 + kOverhead) / kScalarHz);
}

TEST(CostModel, VectorEngine) {
  auto tt = [](Memory rhs, DType d, isa::AluOp op) {
    isa::Instruction inst =
        make(Opcode::TensorTensor, Engine::Vector,
             {tile(Memory::Sbuf, 128, 256, d), tile(Memory::Sbuf, 128, 256, d),
              tile(rhs, 128, 256, d)});
    inst.op0 = static_cast<uint8_t>(op);
    return inst;
  };
  EXPECT_DOUBLE_EQ(seconds(tt(Memory::Sbuf, DType::F32, isa::AluOp::Add)),
                   (2 * 256 + kOverhead) / kVectorHz);
  EXPECT_DOUBLE_EQ(seconds(tt(Memory::Psum, DType::F32, isa::AluOp::Add)),
                   (256 + kOverhead) / kVectorHz);
  EXPECT_DOUBLE_EQ(seconds(tt(Memory::Sbuf, DType::BF16, isa::AluOp::Mul)),
                   (256 + kOverhead) / kVectorHz);
  EXPECT_DOUBLE_EQ(seconds(tt(Memory::Sbuf, DType::BF16, isa::AluOp::Div)),
                   (2 * 256 + kOverhead) / kVectorHz);

  auto reduce =
      make(Opcode::TensorReduce, Engine::Vector,
           {tile(Memory::Sbuf, 128, 1), tile(Memory::Sbuf, 128, 400)});
  reduce.op0 = static_cast<uint8_t>(isa::AluOp::Add);
  EXPECT_DOUBLE_EQ(seconds(reduce), (400 + kOverhead) / kVectorHz);
  reduce.operands[1].dtype = DType::BF16;
  EXPECT_DOUBLE_EQ(seconds(reduce), (200 + kOverhead) / kVectorHz);

  EXPECT_DOUBLE_EQ(
      seconds(make(Opcode::TensorCopy, Engine::Vector,
                   {tile(Memory::Sbuf, 128, 10), tile(Memory::Sbuf, 128, 10)})),
      (64 + kOverhead) / kVectorHz);
  EXPECT_DOUBLE_EQ(seconds(make(Opcode::Iota, Engine::GpSimd,
                                {tile(Memory::Sbuf, 128, 100)})),
                   (150 + 100 + kOverhead) / kGpsimdHz);
}

TEST(CostModel, DmaAndCollectives) {
  double bandwidth = 27.0 * 1024 * 1024 * 1024;
  // 128 x 512 f32 = 256 KiB with 2 KiB rows: full bandwidth.
  auto dma = make(Opcode::DmaCopy, Engine::Dma,
                  {tile(Memory::Sbuf, 128, 512), tile(Memory::Hbm, 128, 512)});
  EXPECT_DOUBLE_EQ(seconds(dma), 2e-6 + 262144 / bandwidth);
  // Under 32 KiB: half bandwidth.
  auto small = make(Opcode::DmaCopy, Engine::Dma,
                    {tile(Memory::Sbuf, 16, 64), tile(Memory::Hbm, 16, 64)});
  EXPECT_DOUBLE_EQ(seconds(small), 2e-6 + 4096 / (bandwidth / 2));
  // A load that narrows f32 to bf16 moves the f32 bytes.
  auto narrowing = dma;
  narrowing.operands[0].dtype = DType::BF16;
  EXPECT_DOUBLE_EQ(seconds(narrowing), 2e-6 + 262144 / bandwidth);
  // Element runs under 512 B (a strided, transposing read): half bandwidth.
  dma.operands[1].strides[0] = 128;
  EXPECT_DOUBLE_EQ(seconds(dma), 2e-6 + 262144 / (bandwidth / 2));

  auto ar =
      make(Opcode::Collective, Engine::Dma,
           {tile(Memory::Hbm, 1, 1 << 20), tile(Memory::Hbm, 1, 1 << 20)});
  EXPECT_DOUBLE_EQ(seconds(ar, 1), 0.0);
  // 4 workers lie on two chips of one instance: a ring all-reduce over
  // NeuronLink, 2(n-1)/n * bytes / bw + 2(n-1) * 10 us, each chip's 384
  // GB/s shared by its two cores.
  EXPECT_DOUBLE_EQ(seconds(ar, 4), 2.0 * 3 / 4 * (4 << 20) / 192e9 + 6 * 10e-6);
  // Ring all-gather of 4 workers' 1 MiB parts: each passes on 3 times.
  auto ag =
      make(Opcode::Collective, Engine::Dma,
           {tile(Memory::Hbm, 1, 1 << 20), tile(Memory::Hbm, 1, 1 << 18)});
  ag.op0 = static_cast<uint8_t>(isa::CollectiveKind::AllGather);
  EXPECT_DOUBLE_EQ(seconds(ag, 1), 0.0);
  EXPECT_DOUBLE_EQ(seconds(ag, 4), 3.0 / 4 * (4 << 20) / 192e9 + 3 * 10e-6);
  // Reduce-scatter of a 4 MiB source into 4 workers' 1 MiB blocks: the
  // reduce half of the ring all-reduce.
  auto rs =
      make(Opcode::Collective, Engine::Dma,
           {tile(Memory::Hbm, 1, 1 << 18), tile(Memory::Hbm, 1, 1 << 20)});
  rs.op0 = static_cast<uint8_t>(isa::CollectiveKind::ReduceScatterMean);
  EXPECT_DOUBLE_EQ(seconds(rs, 4), 3.0 / 4 * (4 << 20) / 192e9 + 3 * 10e-6);
  // A worker's own block: a copy within its HBM.
  auto shard = rs;
  shard.op0 = static_cast<uint8_t>(isa::CollectiveKind::WorkerShard);
  EXPECT_DOUBLE_EQ(seconds(shard, 4),
                   2e-6 + (1 << 20) / (27.0 * 1024 * 1024 * 1024));
}

TEST(CostModel, CollectivesCostWhereTheirGroupLies) {
  auto ar =
      make(Opcode::Collective, Engine::Dma,
           {tile(Memory::Hbm, 1, 1 << 20), tile(Memory::Hbm, 1, 1 << 20)});
  double bytes = 4 << 20;
  // The two cores of one chip: a copy between their HBM, 820 GB/s shared.
  EXPECT_DOUBLE_EQ(seconds(ar, 2), 1.0 * bytes / 410e9 + 2 * 2e-6);
  // A tensor-parallel group is charged for its own size and place: with
  // groups of 2, its collectives stay inside a chip whatever the job.
  auto tensor = ar;
  tensor.int0 = static_cast<int64_t>(isa::CollectiveGroup::Tensor);
  EXPECT_DOUBLE_EQ(isa::instructionSeconds(tensor, trn1, {4, 1}), 0.0);
  EXPECT_DOUBLE_EQ(isa::instructionSeconds(tensor, trn1, {16, 2}),
                   seconds(ar, 2));
  // ... and its data-parallel groups (ranks 2 apart) span chips.
  EXPECT_DOUBLE_EQ(isa::instructionSeconds(ar, trn1, {4, 2}),
                   2.0 * 3 / 4 * bytes / 192e9 + 6 * 10e-6);
  // 128 workers as TP 8 x DP 16: each data-parallel group has 4 workers
  // on each of 4 instances. Reduce-scatter inside each instance, a ring
  // all-reduce of each worker's quarter across instances over EFA (100
  // GB/s shared by the instance's 32 workers), all-gather inside.
  double inside = 3.0 / 4 * bytes / 192e9 + 3 * 10e-6;
  double across = 2.0 * 3 / 4 * (bytes / 4) / (100e9 / 32) + 6 * 30e-6;
  EXPECT_DOUBLE_EQ(isa::instructionSeconds(ar, trn1, {16, 8}),
                   2 * inside + across);
  // Its reduce-scatter is the reduce halves alone.
  auto rs = ar;
  rs.op0 = static_cast<uint8_t>(isa::CollectiveKind::ReduceScatterSum);
  rs.operands[0] = tile(Memory::Hbm, 1, 1 << 16);
  double acrossHalf = 3.0 / 4 * (bytes / 4) / (100e9 / 32) + 3 * 30e-6;
  EXPECT_DOUBLE_EQ(isa::instructionSeconds(rs, trn1, {16, 8}),
                   inside + acrossHalf);
  // A tensor-parallel group of a whole instance stays on NeuronLink.
  EXPECT_DOUBLE_EQ(isa::instructionSeconds(tensor, trn1, {1, 32}),
                   2.0 * 31 / 32 * bytes / 192e9 + 62 * 10e-6);
}

TEST(CostModel, WhatIfVariantsOfTheTarget) {
  // The tensor_tensor rate is a figure of the target: a variant at one
  // cycle an element (kiln-bench-compile --what-if) halves the slow case.
  auto tt = make(Opcode::TensorTensor, Engine::GpSimd,
                 {tile(Memory::Sbuf, 128, 256), tile(Memory::Sbuf, 128, 256),
                  tile(Memory::Sbuf, 128, 256)});
  target::TargetDescription oneCycle = trn1;
  oneCycle.tensorTensorCyclesPerElement.value = 1;
  EXPECT_DOUBLE_EQ(isa::instructionSeconds(tt, oneCycle, 1),
                   (256 + kOverhead) / kGpsimdHz);
  // A transfer holds its queue for its whole time on trn1; on a variant
  // whose queues overlap the fixed latency, only for its bytes.
  auto dma = make(Opcode::DmaCopy, Engine::Dma,
                  {tile(Memory::Sbuf, 128, 512), tile(Memory::Hbm, 128, 512)});
  double bytesTime = 262144 / (27.0 * 1024 * 1024 * 1024);
  EXPECT_DOUBLE_EQ(isa::streamSeconds(dma, trn1, 1), 2e-6 + bytesTime);
  target::TargetDescription overlapping = trn1;
  overlapping.dmaLatencyHoldsQueue = false;
  EXPECT_DOUBLE_EQ(isa::streamSeconds(dma, overlapping, 1), bytesTime);
  EXPECT_DOUBLE_EQ(isa::instructionSeconds(dma, overlapping, 1),
                   2e-6 + bytesTime);
  EXPECT_DOUBLE_EQ(isa::streamSeconds(tt, overlapping, 1), seconds(tt));
}

/// An artifact for trn1 with 2 MiB of HBM, one semaphore and no streams.
artifact::Artifact programOnTrn1(const char *name) {
  artifact::Artifact a;
  a.manifest.set_name(name);
  a.manifest.set_target("trn1");
  a.manifest.set_hbm_bytes(2 << 20);
  a.manifest.set_semaphores(1);
  return a;
}

TEST(Simulator, ModelsAVariantTargetTimingOnly) {
  // Two loads on one queue, the second signalling the end.
  artifact::Artifact a = programOnTrn1("two-loads");
  kneff::Buffer *in = a.manifest.add_buffers();
  in->set_name("in");
  in->set_role(kneff::INPUT);
  in->set_dtype(static_cast<uint32_t>(DType::F32));
  in->add_shape(2 * 128 * 512);
  artifact::Stream queue;
  queue.engine = Engine::Dma;
  for (int i = 0; i < 2; ++i) {
    auto load =
        make(Opcode::DmaCopy, Engine::Dma,
             {tile(Memory::Sbuf, 128, 512), tile(Memory::Hbm, 128, 512)});
    load.operands[0].offset = i * 2048;
    load.operands[1].offset = i * 262144;
    queue.instructions.push_back(load);
  }
  a.streams.push_back(queue);
  double bytesTime = 262144 / (27.0 * 1024 * 1024 * 1024);

  // On trn1 itself the input must be set; timing only, nothing is needed.
  auto unset = sim::Simulator(a).run();
  ASSERT_FALSE(static_cast<bool>(unset));
  EXPECT_EQ(llvm::toString(unset.takeError()), "input buffer 'in' was not set");
  sim::SimOptions timing;
  timing.timingOnly = true;
  auto real = sim::Simulator(a, timing).run();
  ASSERT_TRUE(static_cast<bool>(real)) << llvm::toString(real.takeError());
  EXPECT_DOUBLE_EQ(real->makespanSeconds, 2 * (2e-6 + bytesTime));

  // The second load starts when the first's bytes are through.
  target::TargetDescription overlapping = trn1;
  overlapping.dmaLatencyHoldsQueue = false;
  timing.target = &overlapping;
  auto variant = sim::Simulator(a, timing).run();
  ASSERT_TRUE(static_cast<bool>(variant))
      << llvm::toString(variant.takeError());
  EXPECT_DOUBLE_EQ(variant->makespanSeconds, 2e-6 + 2 * bytesTime);
  EXPECT_DOUBLE_EQ((*variant->trace)[1].startSeconds, bytesTime);
  EXPECT_DOUBLE_EQ(variant->streams[0].busySeconds, 2 * bytesTime);
  // A variant with less SBUF than the program was compiled for is refused.
  target::TargetDescription smaller = trn1;
  smaller.sbufBytesPerPartition /= 2;
  timing.target = &smaller;
  auto refused = sim::Simulator(a, timing).run();
  ASSERT_FALSE(static_cast<bool>(refused));
  EXPECT_EQ(llvm::toString(refused.takeError()),
            "the target modelled ('trn1') has fewer on-chip bytes or DMA "
            "queues than the program's ('trn1')");
}

TEST(Simulator, ReplayedRunsApplyTheRecordedScheduleToNewInputs) {
  // in (HBM) -> SBUF on a queue; VectorE doubles it once the load signals;
  // a second queue stores it to out once VectorE signals.
  artifact::Artifact a = programOnTrn1("double");
  a.manifest.set_semaphores(2);
  for (auto [name, role, offset] :
       {std::tuple{"in", kneff::INPUT, 0}, {"out", kneff::OUTPUT, 4096}}) {
    kneff::Buffer *b = a.manifest.add_buffers();
    b->set_name(name);
    b->set_role(role);
    b->set_dtype(static_cast<uint32_t>(DType::F32));
    b->set_offset(offset);
    b->add_shape(4 * 8);
  }
  auto load = make(Opcode::DmaCopy, Engine::Dma,
                   {tile(Memory::Sbuf, 4, 8), tile(Memory::Hbm, 4, 8)});
  load.numSignals = 1;
  auto twice = make(Opcode::TensorScalar, Engine::Vector,
                    {tile(Memory::Sbuf, 4, 8), tile(Memory::Sbuf, 4, 8)});
  twice.op0 = static_cast<uint8_t>(isa::AluOp::Mul);
  twice.imm0 = 2;
  twice.numWaits = twice.numSignals = 1;
  twice.waitValue[0] = 1;
  twice.signalSemaphore[0] = 1;
  auto store = make(Opcode::DmaCopy, Engine::Dma,
                    {tile(Memory::Hbm, 4, 8), tile(Memory::Sbuf, 4, 8)});
  store.operands[0].offset = 4096;
  store.numWaits = 1;
  store.waitSemaphore[0] = 1;
  store.waitValue[0] = 1;
  a.streams = {{Engine::Dma, 1, {store}},
               {Engine::Vector, 0, {twice}},
               {Engine::Dma, 0, {load}}};

  sim::HostProfile profile;
  sim::SimOptions options;
  options.hostProfile = &profile;
  sim::Simulator simulator(a, options);
  std::optional<double> firstTime;
  for (float value : {1.5f, -3.0f}) {
    std::vector<float> in(32, value);
    ASSERT_FALSE(static_cast<bool>(simulator.setBuffer(
        "in", llvm::StringRef(reinterpret_cast<const char *>(in.data()),
                              in.size() * 4))));
    auto result = simulator.run();
    ASSERT_TRUE(static_cast<bool>(result)) << llvm::toString(result.takeError());
    if (firstTime) {
      EXPECT_EQ(result->makespanSeconds, *firstTime);
    }
    firstTime = result->makespanSeconds;
    auto out = simulator.getBuffer("out");
    ASSERT_TRUE(static_cast<bool>(out));
    std::vector<float> got(32);
    std::memcpy(got.data(), out->data(), 128);
    EXPECT_EQ(got, std::vector<float>(32, 2 * value));
  }
  // The first run scheduled; only the second was replayed.
  EXPECT_EQ(profile.instructions[static_cast<int>(Opcode::DmaCopy)], 2);
  EXPECT_EQ(profile.instructions[static_cast<int>(Opcode::TensorScalar)], 1);
}

TEST(Simulator, ASemaphoreReachesAValueAtItsValueThSignalInTime) {
  // Queue 0's large load signals after queue 1's small one, though the
  // simulator takes it first; a wait for one signal starts at the small
  // load's end, a wait for two at the large one's.
  artifact::Artifact a = programOnTrn1("signals");
  auto load = [](int64_t partitions, int64_t free, int64_t offset) {
    auto inst = make(Opcode::DmaCopy, Engine::Dma,
                     {tile(Memory::Sbuf, partitions, free),
                      tile(Memory::Hbm, partitions, free)});
    inst.operands[0].offset = offset;
    inst.numSignals = 1;
    inst.signalSemaphore[0] = 0;
    return inst;
  };
  artifact::Stream large{Engine::Dma, 0, {load(128, 512, 0)}};
  artifact::Stream small{Engine::Dma, 1, {load(32, 64, 4096)}};
  auto waiting = [](uint32_t value) {
    auto copy = make(Opcode::TensorCopy, Engine::Vector,
                     {tile(Memory::Sbuf, 32, 64), tile(Memory::Sbuf, 32, 64)});
    copy.operands[0].offset = 8192 + 256 * value;
    copy.numWaits = 1;
    copy.waitSemaphore[0] = 0;
    copy.waitValue[0] = value;
    return copy;
  };
  artifact::Stream vector{Engine::Vector, 0, {waiting(1), waiting(2)}};
  a.streams = {vector, large, small};
  sim::SimOptions timing;
  timing.timingOnly = true;
  auto result = sim::Simulator(a, timing).run();
  ASSERT_TRUE(static_cast<bool>(result)) << llvm::toString(result.takeError());
  double smallEnd = seconds(a.streams[2].instructions[0]);
  double largeEnd = seconds(a.streams[1].instructions[0]);
  ASSERT_LT(smallEnd, largeEnd);
  std::vector<double> copyStarts;
  for (const sim::TraceEvent &e : *result->trace) {
    if (e.stream == 0) {
      copyStarts.push_back(e.startSeconds);
    }
  }
  ASSERT_EQ(copyStarts.size(), 2u);
  EXPECT_DOUBLE_EQ(copyStarts[0], smallEnd);
  EXPECT_DOUBLE_EQ(copyStarts[1], largeEnd);
}

TEST(Targets, FiguresAndProvenance) {
  EXPECT_EQ(trn1.sbufBytes(), 24 * 1024 * 1024);
  EXPECT_EQ(trn1.psumBytes(), 2 * 1024 * 1024);
  EXPECT_DOUBLE_EQ(trn1.corePeakFlopsBf16(), 95e12);
  EXPECT_FALSE(trn1.tensorFlopsBf16.assumed);
  EXPECT_TRUE(trn1.dmaFixedLatencySeconds.assumed);
  EXPECT_TRUE(trn1.dmaLatencyHoldsQueue);
  EXPECT_DOUBLE_EQ(trn1.tensorTensorCyclesPerElement, 2);
  EXPECT_FALSE(trn1.tensorTensorCyclesPerElement.assumed);
  EXPECT_TRUE(trn1.collectiveHopLatencySeconds.assumed);
  const target::TargetDescription *trn2 = target::lookupTarget("trn2");
  ASSERT_NE(trn2, nullptr);
  EXPECT_EQ(trn2->sbufBytes(), 28 * 1024 * 1024);
  EXPECT_TRUE(trn2->linkBytesPerSecond.assumed);
  EXPECT_EQ(target::lookupTarget("trn9"), nullptr);
}

} // namespace

namespace {

TEST(Rounding, Bf16NearestEvenAndSeededStochastic) {
  sim::Rounder nearest;
  // 1 + 2^-8 is a tie between 1 and 1 + 2^-7: the even one is 1.
  EXPECT_EQ(nearest.round(isa::DType::BF16, 1.00390625), 1.0);
  EXPECT_EQ(nearest.round(isa::DType::BF16, 1.01171875), 1.015625);
  EXPECT_EQ(nearest.round(isa::DType::F32, 0.1), static_cast<float>(0.1));

  // Stochastic rounding is reproducible for a seed, differs across seeds,
  // only ever picks a neighbour, and is unbiased on average.
  auto draws = [](uint64_t seed) {
    sim::Rounder r(/*stochastic=*/true, seed);
    std::vector<double> values;
    for (int i = 0; i < 20000; ++i) {
      values.push_back(r.round(isa::DType::BF16, 1.001));
    }
    return values;
  };
  std::vector<double> a = draws(7), b = draws(7), c = draws(8);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  double sum = 0;
  for (double v : a) {
    ASSERT_TRUE(v == 1.0 || v == 1.0078125) << v;
    sum += v;
  }
  EXPECT_NEAR(sum / a.size(), 1.001, 2e-4);
}

TEST(Rounding, StochasticStreamDependsOnTheResultCountAlone) {
  // Two replicas that round different values (one meets an infinity) draw
  // the same bits for the results after: their shared update rounds alike.
  sim::Rounder a(/*stochastic=*/true, 3), b(/*stochastic=*/true, 3);
  a.round(isa::DType::BF16, 2.5);
  b.round(isa::DType::BF16, std::numeric_limits<double>::infinity());
  a.round(isa::DType::F32, 0.1); // f32 results draw nothing
  for (int i = 0; i < 100; ++i) {
    double x = 1.0 + i * 1e-4;
    EXPECT_EQ(a.round(isa::DType::BF16, x), b.round(isa::DType::BF16, x)) << i;
  }
}

} // namespace
